"""Delivery: targets, the outbox, the inbox, and the service that ties them together.

Owns where results go (``owner``, ``last``, chats, the dashboard inbox), that
untrusted targets are refused and audited, and that a result is sent once and
never lost silently.

Import from the modules themselves (``vikingbot.delivery.<module>``); this package
re-exports nothing.
"""
