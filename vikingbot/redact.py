"""Hiding secrets in text shown to people (pure)."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def mask_url(url: str) -> str:
    """A URL with any password replaced by ``***`` (``postgresql://me:***@db/x``)."""
    return _URL_PASSWORD.sub(r"\1***@", url)
