"""Sessions: keys, the JSONL session store and the OpenViking import.

Import from the modules themselves (``vikingbot.session.<module>``); this package
re-exports nothing.
"""
