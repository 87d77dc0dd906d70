"""Tools the agent can call: the base class, the context a call gets, the registry.

Built-in tools live in ``fs`` (files), ``shell`` (``exec``), ``web``
(``web_fetch``) and ``message``; every tool, built-in or plugin, is found through
the ``vikingbot.tools`` entry-point group (see ``registry``).

Import from the modules themselves (``vikingbot.tools.<module>``); this package
re-exports nothing.
"""
