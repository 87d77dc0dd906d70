"""A small bar chart of model calls per day, as inline SVG (pure, server-side).

No chart library and no script: the page gets finished markup. Every text in
it is a number or a date we formatted, and still escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from html import escape

WIDTH = 420
HEIGHT = 120
PAD_BOTTOM = 18
PAD_TOP = 14


def calls_chart(days: Sequence[tuple[date, int]]) -> str:
    """One bar per day, oldest left; the tallest bar fills the height."""
    n = max(len(days), 1)
    top = max((c for _, c in days), default=0)
    slot = WIDTH / n
    bar_w = max(slot * 0.7, 1.0)
    usable = HEIGHT - PAD_BOTTOM - PAD_TOP
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="xMidYMid meet" '
        f'role="img" aria-label="model calls per day, last {len(days)} days">'
    ]
    for i, (day, count) in enumerate(days):
        h = 0.0 if top == 0 else usable * count / top
        x = i * slot + (slot - bar_w) / 2
        y = HEIGHT - PAD_BOTTOM - h
        label = escape(f"{day.isoformat()}: {count} model calls")
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}">'
            f"<title>{label}</title></rect>"
        )
        if count:
            parts.append(
                f'<text class="val" x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}">{count}</text>'
            )
        if i % 2 == 0 or n <= 7:
            parts.append(
                f'<text class="day" x="{x + bar_w / 2:.1f}" y="{HEIGHT - 5}">'
                f"{escape(day.strftime('%d'))}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
