"""The agent: the loop seam (``types``), the built-in loop, context and approval.

``types`` is the contract every loop implements and ``history`` the half of a
turn they share; ``loop.BuiltinLoop`` is the loop vikingbot ships and
``acp_loop`` the one that runs an external agent over ACP; ``context`` builds
what the model sees; ``approval`` decides which tool calls may run and audits
every decision.

Import from the modules themselves (``vikingbot.agent.<module>``); this package
re-exports nothing.
"""
