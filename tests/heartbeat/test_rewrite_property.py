"""Random user edits racing cycle rewrites: not one user line lost, no entry duplicated.

Two layers:
- the pure core, 1,000 interleavings: the cycle decides its moves on the text
  it read, the user edits the file, then the moves are applied to the edited
  text (the real race: decisions are always made on a stale copy);
- the real file lock with threads, a few hundred interleavings: a user thread
  editing through ``locked_edit`` while a cycle thread reads, decides and calls
  ``apply_moves``.
"""

from __future__ import annotations

import random
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vikingbot.heartbeat.parser import parse_heartbeat
from vikingbot.heartbeat.rewrite import (
    Complete,
    Delete,
    Move,
    Park,
    apply_moves,
    apply_moves_to_text,
    locked_edit,
)
from vikingbot.heartbeat.types import ParseResult

DAY = date(2026, 1, 5)
MARKERS = ["- ", "- [ ] ", "* ", "+ [ ] ", "1. ", ""]
TAGS = ["", " <!-- deliver:slack:C1 -->", " <!-- note -->"]


@dataclass
class Doc:
    lines: list[str]
    eol: str
    bom: bool
    final_newline: bool

    def text(self) -> str:
        body = self.eol.join(self.lines) + (self.eol if self.final_newline and self.lines else "")
        return ("\ufeff" if self.bom else "") + body


def task_id(i: int) -> str:
    return f"task {i} do thing"


def build_document(seed: int) -> tuple[Doc, int]:
    """A random HEARTBEAT.md from a seed (one draw keeps 1,000 examples quick)."""
    rnd = random.Random(seed)
    n = rnd.randint(1, 7)
    lines = ["# Heartbeat Tasks", ""]
    if rnd.random() < 0.5:
        lines += ["## Active Tasks", "", "<!-- Add your periodic tasks below this line -->"]
    for i in range(n):
        lines.append(f"{rnd.choice(MARKERS)}{task_id(i)}{rnd.choice(TAGS)}")
        lines += [f"  detail {i}.{j}" for j in range(rnd.randint(0, 2))]
        if rnd.random() < 0.5:
            lines.append("")
    if rnd.random() < 0.5:
        lines += ["", "## Completed", "", "<!-- Move completed tasks here -->"]
        lines += [f"- [x] old {k} (done 2025-12-31)" for k in range(rnd.randint(0, 2))]
    doc = Doc(
        lines=lines,
        eol=rnd.choice(["\n", "\r\n"]),
        bom=rnd.random() < 0.5,
        final_newline=rnd.random() < 0.5,
    )
    return doc, n


documents = st.integers(min_value=0, max_value=2**32).map(build_document)


USER_LINE_KINDS = ["entry", "indented", "indented-comment", "comment", "heading", "blank"]


def user_line(kind: str, k: int) -> str:
    return {
        "entry": f"- user {k} new task",
        "indented": f"  user {k} more detail",
        "indented-comment": f"  <!-- user {k} note -->",
        "comment": f"<!-- user {k} remark -->",
        "heading": f"## User {k} notes",
        "blank": "",
    }[kind]


ops = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(USER_LINE_KINDS), st.integers(0, 60)),
    st.tuples(st.just("reword"), st.integers(0, 6), st.just(0)),
    st.tuples(st.just("check"), st.integers(0, 6), st.just(0)),
    st.tuples(st.just("remove"), st.integers(0, 6), st.just(0)),
)


def apply_user_op(lines: list[str], op: tuple[str, object, int], k: int) -> list[str]:
    """One user edit on the current lines (a pure function of what is there now)."""
    kind, arg, pos = op
    lines = list(lines)
    if kind == "add":
        lines.insert(pos % (len(lines) + 1), user_line(str(arg), k))
        return lines
    needle = task_id(int(str(arg)))
    hits = [n for n, line in enumerate(lines) if needle in line]
    if not hits:
        return lines
    at = hits[0]
    if kind == "reword":
        lines[at] = lines[at].replace(needle, f"{needle} edited {k}")
    elif kind == "check":
        lines[at] = lines[at].replace("[ ]", "[x]", 1)
    else:  # remove the entry's first line and its own detail lines
        stop = at + 1
        while stop < len(lines) and lines[stop].startswith(f"  detail {arg}."):
            stop += 1
        del lines[at:stop]
    return lines


def split_lines(text: str) -> list[str]:
    text = text.removeprefix("\ufeff")
    if not text:
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line.removesuffix("\r") for line in body.split("\n")]


def cycle_moves(seen: ParseResult, picks: list[tuple[int, str]]) -> list[Move]:
    moves: list[Move] = []
    for i, kind in picks:
        entry = next((e for e in seen.active if task_id(i) in e.text), None)
        if entry is None:
            continue
        if kind == "complete":
            moves.append(Complete(entry.key, DAY, expect=entry.raw))
        elif kind == "delete":
            moves.append(Delete(entry.key, expect=entry.raw))
        else:
            moves.append(Park(entry.key, f"reason {i}"))
    return moves


def outside_completed_keys(result: ParseResult) -> Counter[str]:
    return Counter(e.key for e in result.entries if e.section != "completed")


picks_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from(["complete", "delete", "park"])),
    max_size=4,
    unique_by=lambda p: p[0],
)


@settings(max_examples=1000, deadline=None)
@given(doc_n=documents, picks=picks_strategy, user_ops=st.lists(ops, max_size=6))
def test_pure_core_never_loses_a_user_line(
    doc_n: tuple[Doc, int], picks: list[tuple[int, str]], user_ops: list[tuple[str, object, int]]
) -> None:
    doc, _ = doc_n
    # Every point at which the cycle may have read the file: after 0, 1, ... user edits.
    states = [doc.lines]
    for k, op in enumerate(user_ops):
        states.append(apply_user_op(states[-1], op, k))
    edited = Doc(states[-1], doc.eol, doc.bom, doc.final_newline).text()
    for read_after, seen_lines in enumerate(states):
        seen = Doc(seen_lines, doc.eol, doc.bom, doc.final_newline).text()
        moves = cycle_moves(parse_heartbeat(seen), picks)  # decided on a stale copy
        check_rewrite(doc, edited, moves, range(read_after, len(user_ops)))


def check_rewrite(doc: Doc, edited: str, moves: list[Move], unseen_ops: range) -> None:
    """``unseen_ops``: the user edits made after the cycle read the file."""
    out, report = apply_moves_to_text(edited, moves)

    # Format kept: BOM, line endings, final newline.
    assert out.startswith("\ufeff") == doc.bom
    if doc.eol == "\r\n":
        assert "\n" not in out.replace("\r\n", "")
    if split_lines(out)[-1:] == split_lines(edited)[-1:] != [""]:
        assert out.endswith("\n") == edited.endswith("\n")

    # Every line the user has now is still there, except lines of entries a move touched.
    before = parse_heartbeat(edited)
    touched: Counter[str] = Counter()
    for move in report.applied:
        entry = before.find(move.key)
        assert entry is not None
        touched.update(entry.raw)
        if isinstance(move, Complete | Delete):
            assert entry.raw == move.expect  # only entries exactly as the cycle saw them
    out_lines = Counter(split_lines(out))
    edited_lines = Counter(split_lines(edited))
    missing = edited_lines - touched - out_lines
    if missing == Counter({"": 1}) and out.endswith("\n") and not edited.endswith("\n"):
        missing.clear()  # a blank last line without final newline: the same bytes
    assert not missing, f"lost lines: {missing}"
    for k in unseen_ops:  # an edit the cycle never saw is never undone
        for kind in USER_LINE_KINDS[:-1]:
            wanted = user_line(kind, k)
            assert out_lines[wanted] == edited_lines[wanted]

    # No entry duplicated; moved entries are where they should be.
    after = parse_heartbeat(out)
    keys_before, keys_after = outside_completed_keys(before), outside_completed_keys(after)
    for move in report.applied:
        if isinstance(move, Complete | Delete):
            keys_before[move.key] -= 1
    assert +keys_before == +keys_after
    done = [e for e in after.entries if e.section == "completed" and "(done 2026-01-05)" in e.text]
    assert len(done) == sum(isinstance(m, Complete) for m in report.applied)
    for move in report.applied:
        if isinstance(move, Park):
            parked = after.find(move.key)
            assert parked is not None and parked.parked == move.reason

    # A move is skipped exactly when its entry is gone or changed.
    for move, _why in report.skipped:
        entry = before.find(move.key)
        changed = (
            isinstance(move, Complete | Delete) and entry is not None and entry.raw != move.expect
        )
        assert entry is None or changed


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    doc_n=documents,
    picks=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(["complete", "park"])),
        max_size=4,
        unique_by=lambda p: p[0],
    ),
    user_ops=st.lists(ops.filter(lambda op: op[0] != "remove"), min_size=1, max_size=4),
)
def test_threads_through_the_file_lock(
    doc_n: tuple[Doc, int], picks: list[tuple[int, str]], user_ops: list[tuple[str, object, int]]
) -> None:
    doc, n = doc_n
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "HEARTBEAT.md"
        path.write_bytes(doc.text().encode("utf-8"))
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def user() -> None:
            try:
                start.wait()
                for k, op in enumerate(user_ops):

                    def edit(text: str, op: tuple[str, object, int] = op, k: int = k) -> str:
                        lines = apply_user_op(split_lines(text), op, k)
                        ends = text.endswith("\n")
                        return doc.eol.join(lines) + (doc.eol if ends and lines else "")

                    locked_edit(path, edit)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def cycle() -> None:
            try:
                start.wait()
                for half in (picks[::2], picks[1::2]):
                    seen = parse_heartbeat(path.read_text(encoding="utf-8"))  # unlocked read
                    apply_moves(path, cycle_moves(seen, half))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=user), threading.Thread(target=cycle)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not errors, errors
        final = path.read_bytes().decode("utf-8")

    final_lines = split_lines(final)
    counts = Counter(final_lines)
    # Every line the user added is there exactly once.
    for k, op in enumerate(user_ops):
        if op[0] == "add" and op[1] != "blank":
            assert counts[user_line(str(op[1]), k)] == 1, (k, op, final)
    # Every original task is there exactly once (reworded, checked, parked or completed).
    for i in range(n):
        assert sum(task_id(i) in line for line in final_lines) == 1, (i, final)
    # Original detail lines are never lost or doubled.
    for line in split_lines(doc.text()):
        if line.startswith("  detail"):
            assert counts[line] == 1
    assert final.startswith("\ufeff") == doc.bom
