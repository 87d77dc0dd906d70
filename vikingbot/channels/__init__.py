"""Channels: chat platforms as plugins on the bus, and the manager that runs them.

Owns the channel base class, allow-lists, the owner's chat, message splitting,
sending with retries through the outbox, and the built-in ``cli``, ``webhook``,
``slack`` and ``telegram`` channels (each imported only when enabled).

Import from the modules themselves (``vikingbot.channels.<module>``); this package
re-exports nothing.
"""
