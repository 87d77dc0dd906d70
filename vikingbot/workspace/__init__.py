"""Workspaces: the folder each session's agent works in, and the template that fills it.

Import from the modules themselves (``vikingbot.workspace.<module>``); this package
re-exports nothing.
"""
