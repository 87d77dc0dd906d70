"""Checkers for ``only-if:`` entries: is there work, and what is its signature.

Kinds are found through the ``vikingbot.checkers`` entry-point group (see
``vikingbot.registry``); the built-ins are ``command``, ``file``, ``http``,
``github`` and ``gitlab``.
"""

from vikingbot.heartbeat.checkers.base import Checker, CheckResult, signature_of
from vikingbot.heartbeat.checkers.runner import (
    build_checker,
    parse_only_if,
    run_check,
    validate_checkers,
)

__all__ = [
    "CheckResult",
    "Checker",
    "build_checker",
    "parse_only_if",
    "run_check",
    "signature_of",
    "validate_checkers",
]
