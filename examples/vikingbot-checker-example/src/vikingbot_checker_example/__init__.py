"""Example vikingbot checker plugin: ``disk-space``, work when a disk runs low.

Options: ``path`` (default ``/``) and ``min_free_percent`` (default 10).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers import Checker, CheckResult, signature_of

__all__ = ["DiskSpaceChecker"]

_GIB = 1024**3


class DiskSpaceChecker(Checker):
    kind = "disk-space"
    options = frozenset({"path", "min_free_percent"})

    def validate(self) -> None:
        super().validate()  # refuses unknown options
        limit = self.opts.get("min_free_percent", 10)
        if not isinstance(limit, int | float) or isinstance(limit, bool) or not 0 <= limit <= 100:
            raise CheckerError(f"{self.where}.min_free_percent: expected a number from 0 to 100")

    async def check(self, scope: str | None) -> CheckResult:
        path = Path(self.opt_str("path", "/")).expanduser()
        try:
            usage = await asyncio.to_thread(shutil.disk_usage, path)
        except OSError as exc:  # becomes fail-open/closed in the runner
            raise CheckerError(f"{self.where}: cannot read disk usage of {path}: {exc}") from exc
        free_pct = 100 * usage.free / usage.total if usage.total else 0.0
        limit = float(self.opts.get("min_free_percent", 10))
        if free_pct >= limit:
            return CheckResult(has_work=False, signature=signature_of("ok", str(path)))
        bucket = int(free_pct // 5) * 5
        return CheckResult(
            has_work=True,
            signature=signature_of("low", str(path), str(bucket)),
            context=(
                f"Only {free_pct:.1f}% free on {path} "
                f"({usage.free / _GIB:.1f} GiB of {usage.total / _GIB:.1f} GiB); "
                f"the limit is {limit:g}%."
            ),
        )
