"""Cron: scheduled agent jobs (``at``, ``every``, ``cron``) kept in the state store.

``schedule`` holds the pure due maths, ``jobs`` the ``cron_jobs`` repository,
``service`` the runner, ``tool`` the agent's ``cron`` tool.

Import from the modules themselves (``vikingbot.cron.<module>``); this package
re-exports nothing.
"""
