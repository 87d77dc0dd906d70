"""Names with a time each, handed back once their time has come.

A heap with lazy deletion: putting a name again or dropping it leaves its old
entry in the heap, skipped when it is popped; the heap is rebuilt when such
entries outnumber the live ones. The heartbeat keeps two: when a workspace's
next session goes stale (the index) and when a workspace's next unit falls due
(the loop's wake-ups, wakeups.py).
"""

from __future__ import annotations

import heapq
from datetime import datetime


class DueQueue:
    def __init__(self) -> None:
        self._at: dict[str, datetime] = {}  # name -> its live entry in the heap
        self._heap: list[tuple[datetime, str]] = []

    def __len__(self) -> int:
        return len(self._at)

    def put(self, name: str, at: datetime) -> None:
        if self._at.get(name) != at:
            self._at[name] = at
            heapq.heappush(self._heap, (at, name))

    def discard(self, name: str) -> None:
        self._at.pop(name, None)

    def clear(self) -> None:
        self._at.clear()
        self._heap.clear()

    def next_at(self) -> datetime | None:
        """The earliest live time, None when empty."""
        heap = self._heap
        while heap and self._at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # replaced or dropped since
        return heap[0][0] if heap else None

    def pop_due(self, now: datetime, *, inclusive: bool) -> set[str]:
        """The names whose time is before ``now`` (or at it, ``inclusive``), removed."""
        out = set()
        heap = self._heap
        while heap and (heap[0][0] <= now if inclusive else heap[0][0] < now):
            at, name = heapq.heappop(heap)
            if self._at.get(name) == at:  # else replaced or dropped since
                del self._at[name]
                out.add(name)
        if len(heap) > 4 * len(self._at) + 1024:  # drop replaced entries
            self._heap = [(at, name) for name, at in self._at.items()]
            heapq.heapify(self._heap)
        return out
