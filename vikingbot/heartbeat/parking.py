"""Parked entries: listing them, and ``unpark`` (restore an entry parked for any reason).

An entry is parked when HEARTBEAT.md carries its ``<!-- parked: reason -->``
mark (what the user sees). Unparking removes the mark under the file's lock,
resets the entry's retries and continuations in the state store, and forgets
the "is parked" notice, so a later park is told again. It works the same with
or without a gateway running: the gateway re-reads the file (mtime) and the
entry rows on its next cycle.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from vikingbot.errors import HeartbeatError
from vikingbot.heartbeat.rewrite import Unpark, apply_moves
from vikingbot.heartbeat.state import HeartbeatState
from vikingbot.heartbeat.types import Entry, EntryState, WorkspaceInput


def parked_entries(inputs: list[WorkspaceInput], root: Path) -> list[dict[str, Any]]:
    """Every parked entry: workspace, entry, reason, file, line, retries, continuations."""
    out: list[dict[str, Any]] = []
    for wsin in inputs:
        if wsin.parsed is None:
            continue
        for e in wsin.parsed.active:
            if e.parked is None:
                continue
            st = wsin.entries.get(e.ident)
            out.append(
                {
                    "workspace": wsin.name,
                    "entry": e.ident,
                    "reason": e.parked or (st.parked_reason if st else None),
                    "file": str(root / wsin.name / "HEARTBEAT.md"),
                    "line": e.line,
                    "retries": st.retries if st else 0,
                    "continuations": st.continuations if st else 0,
                }
            )
    return out


def find_parked(
    inputs: list[WorkspaceInput], name: str, workspace: str | None
) -> tuple[WorkspaceInput, Entry]:
    """The one parked entry called ``name`` (its title or text); a clear error otherwise."""
    wanted = " ".join(name.split())
    hits = [
        (wsin, e)
        for wsin in inputs
        if wsin.parsed is not None and (workspace is None or wsin.name == workspace)
        for e in wsin.parsed.active
        if e.parked is not None and wanted in (e.ident, e.key)
    ]
    if not hits:
        where = f" in workspace {workspace}" if workspace else ""
        raise HeartbeatError(
            f"no parked entry {name!r}{where}; `vikingbot heartbeat parked` lists them"
        )
    if len(hits) > 1:
        places = ", ".join(sorted(w.name for w, _ in hits))
        raise HeartbeatError(
            f"entry {name!r} is parked in several workspaces ({places}); name one with -w"
        )
    return hits[0]


def unpark(
    state: HeartbeatState, wsin: WorkspaceInput, entry: Entry, root: Path, now: datetime
) -> dict[str, Any]:
    """Remove the mark, reset the counters; returns what was done (for --json)."""
    path = root / wsin.name / "HEARTBEAT.md"
    report = apply_moves(path, [Unpark(entry.ident)])
    if report.skipped:
        _, why = report.skipped[0]
        raise HeartbeatError(f"could not unpark {entry.ident!r} in {path}: {why}")
    st = wsin.entries.get(entry.ident) or EntryState(wsin.name, entry.ident, first_seen=now)
    st = replace(
        st,
        parked_reason=None,
        parked_text_hash=None,
        retries=0,
        continuations=0,
        continue_next=False,
        running_since=None,
    )
    state.save_entry(st)
    return {"workspace": wsin.name, "entry": entry.ident, "was": entry.parked, "file": str(path)}
