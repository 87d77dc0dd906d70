"""Memory the user can read and undo: ``memory/MEMORY.md`` and ``memory/USER.md``.

``versions`` owns the files and their snapshots (``vikingbot memory log|show|undo``),
``consolidate`` the idle pass that asks a model what to keep, ``model`` its model
call. The ``memory`` tool lives beside history search in ``housekeeping``.
"""
