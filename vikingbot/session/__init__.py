"""Sessions: keys, the JSONL session store and the OpenViking import.

Names are re-exported lazily so that importing ``vikingbot.session.types``
(which every service does) stays cheap.

Import from the modules themselves (``vikingbot.session.<module>``); this package
re-exports nothing.
"""
