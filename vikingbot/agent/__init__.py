"""The agent: the loop seam (``types``), the built-in loop, context and approval.

``types`` is the contract every loop implements; ``loop.BuiltinLoop`` is the
loop vikingbot ships; ``context`` builds what the model sees; ``approval``
decides which tool calls may run and audits every decision.

Import from the modules themselves (``vikingbot.agent.<module>``); this package
re-exports nothing.
"""
