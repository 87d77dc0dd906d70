"""Housekeeping: the history full-text index, retention pruning, memory consolidation.

``index`` copies session lines into the index, ``search`` queries it (and is the
``search_history`` tool), ``prune`` enforces ``bot.memory.history_max_days``,
``consolidate`` writes idle sessions into ``memory/MEMORY.md``, ``service`` runs
all three on a schedule.

Import from the modules themselves (``vikingbot.housekeeping.<module>``); this package
re-exports nothing.
"""
