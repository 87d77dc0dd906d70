"""Data types of the heartbeat: the file, the plan, the state, the ledger, the vocabulary.

Plain dataclasses, no behaviour beyond derived properties, so the parser, the
planner, ``settle``, the runner, the CLI and the tests share them without
importing each other. ``Reason`` and ``Outcome`` are the checked vocabulary of
the run ledger, ``heartbeat plan`` / ``runs`` and docs/heartbeat.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, get_args

from vikingbot.errors import EntryError
from vikingbot.session.types import SessionMeta

Reason = Literal[
    # skips, before any model call
    "disabled",
    "quiet-hours",
    "skip-flag",
    "stale",
    "no-sessions",
    "paused",
    "budget",
    "empty",
    "unreadable",
    "invalid",  # a scheduled entry whose schedule cannot be computed (e.g. every: 9999999d)
    "checker-missing",  # an entry's only-if: names a checker bot.heartbeat.checkers lacks
    "busy",  # the workspace's previous cycle, or another gateway, holds the unit
    "parked",
    "pending",
    "not-due",
    "provider-down",  # the model provider is down; the unit waits for the next probe
    # skips at run time (the checker decided)
    "no-work",
    "missed",  # a daily:/cron: slot found later than bot.heartbeat.missed_grace
    "unchanged",
    # runs
    "due",
    "manual",
    "continuation",
]
"""Why a decision was taken (see docs/heartbeat.md, "Reason codes")."""

Outcome = Literal[
    "delivered",  # a channel accepted the result
    "inboxed",  # kept in the local inbox (no channel could take it)
    "silent",  # target none/silent: ledger and log only
    "repeat",  # the same news already reached its target within bot.heartbeat.repeat_window
    "noop",  # HEARTBEAT_OK or an empty reply: nothing to tell
    "kept",  # HEARTBEAT_KEEP: the entry stays / continues
    "completed",  # a per-task entry finished (moved to Completed) without a message
    "failed",  # the turn raised or ended in an error (a retry is charged)
    "timeout",  # the turn ran past task_timeout_s (a retry is charged)
    "parked",  # this run parked the entry (retries or continuations used up)
    "provider-down",  # the model provider could not be reached: no retry charged
    "busy",  # another holder has the unit's claim
    "refused",  # the entry's deliver tag was refused; the owner got the result instead
]
"""What became of a run (the ``outcome`` column of the run ledger)."""

REASONS: frozenset[str] = frozenset(get_args(Reason))
OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))
UnitKind = Literal["checklist", "task", "scheduled"]
Trigger = Literal["scheduled", "manual"]

Section = Literal["active", "completed", "flat", "other"]
"""Where an entry sits in the file.

- ``active``: under ``## Active Tasks``;
- ``completed``: under ``## Completed`` (never work);
- ``flat``: the file has no ``## Active Tasks`` heading, so every entry outside
  ``## Completed`` is active;
- ``other``: the file has an ``## Active Tasks`` heading but the entry is
  somewhere else (above it, or under another top-level heading such as
  ``## Notes``). Not work; listed so that ``heartbeat plan`` can show it.
"""


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a scheduled entry fires. Exactly one of the three values is set."""

    kind: Literal["every", "daily", "cron"]
    every_s: float | None = None
    daily: str | None = None  # "HH:MM", zero-padded, in the heartbeat timezone
    cron: str | None = None  # a 5-field cron expression, without quotes

    def describe(self) -> str:
        """Short human form, as a user would write it: ``every 30m``."""
        if self.kind == "every" and self.every_s is not None:
            return f"every {format_duration(self.every_s)}"
        if self.kind == "daily":
            return f"daily at {self.daily}"
        return f"cron {self.cron}"


def format_duration(seconds: float) -> str:
    """``5400`` -> ``90m``; the largest unit that divides evenly."""
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of HEARTBEAT.md.

    ``line``/``end_line`` are 1-based and inclusive. ``raw`` holds the exact
    original lines without their line endings (a CRLF file's ``\\r`` is not
    included). ``text`` is what the entry says: list marker and checkbox
    removed, HTML comments (tags) removed, continuation lines joined with
    ``"\\n"``. ``tags`` are the HTML comments inside the entry, exactly as
    written.
    """

    line: int
    end_line: int
    text: str
    raw: tuple[str, ...]
    checked: bool
    section: Section
    scheduled: bool = False
    schedule: Schedule | None = None
    only_if: tuple[str, str | None] | None = None  # (checker name, scope)
    title: str | None = None
    task: str | None = None
    skill: str | None = None  # a skill whose text the turn carries (``skill:``)
    model: str | None = None  # the model its own turn uses (``model:``)
    tags: tuple[str, ...] = ()
    deliver: str | None = None  # untrusted; validated by delivery, not here
    parked: str | None = None  # reason from a ``<!-- parked: ... -->`` tag
    error: str | None = None  # set when the entry is malformed (then it never runs)
    occurrence: int = 0  # how many work entries before this one have the same key

    @property
    def ident(self) -> str:
        """Stable identity of a work entry: its ``key``, then `` #2``, `` #3`` for repeats.

        Two active entries with the same text are two entries; a look-alike
        under ``## Completed`` (or any checked line) is never work and never
        shares an identity with one, so it cannot take an active entry's outcome.
        """
        return self.key if not self.occurrence else f"{self.key} #{self.occurrence + 1}"

    @property
    def key(self) -> str:
        """Identity for state and dedupe.

        A scheduled entry is identified by its title; everything else by its
        text with every run of whitespace (including line breaks) collapsed to
        one space. Editing a plain entry's words therefore makes it a new entry;
        re-indenting or re-wrapping it does not. Tags are not part of the key.
        """
        if self.scheduled and self.title:
            return self.title
        return normalise_key(self.text)

    @property
    def is_work(self) -> bool:
        """Unchecked and in a section whose entries are work."""
        return not self.checked and self.section in ("active", "flat")

    @property
    def prompt_text(self) -> str:
        """What the agent is asked to do: the ``task:`` (or title) or the text."""
        if self.scheduled:
            return self.task or self.title or self.text
        return self.task or self.text  # a plain task may name its model: ``model: x task: ...``


def normalise_key(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class EntryProblem:
    """A malformed entry: where, what is wrong, and the line as written."""

    line: int
    message: str
    raw: str

    def as_error(self, path: str | None = None) -> EntryError:
        return EntryError(self.message, line=self.line, path=path)

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Heading:
    """A Markdown heading: 1-based line, level (number of ``#``), normalised name."""

    line: int
    level: int
    name: str  # case-folded, whitespace collapsed, e.g. "active tasks"


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Everything the parser found in one HEARTBEAT.md.

    ``entries`` holds every entry, including checked, completed, parked and
    malformed ones. ``errors`` has one problem per malformed work entry.
    ``missing`` is set when there is no file; ``unreadable`` says why a file
    that exists was not parsed (not UTF-8, too large, I/O error).
    """

    entries: tuple[Entry, ...] = ()
    errors: tuple[EntryProblem, ...] = ()
    headings: tuple[Heading, ...] = ()
    missing: bool = False
    unreadable: str | None = None

    @property
    def active(self) -> tuple[Entry, ...]:
        """Work entries that parsed fine (parked ones included; the caller skips them)."""
        return tuple(e for e in self.entries if e.is_work and e.error is None)

    @property
    def tasks(self) -> tuple[Entry, ...]:
        """Active entries without a schedule (the checklist / per-task work)."""
        return tuple(e for e in self.active if not e.scheduled)

    @property
    def scheduled(self) -> tuple[Entry, ...]:
        """Active entries with a schedule."""
        return tuple(e for e in self.active if e.scheduled)

    @property
    def is_empty(self) -> bool:
        """No work and no errors: a cycle has nothing to do here.

        An unreadable file is *not* empty (the caller reports ``unreadable``);
        a missing file is.
        """
        if self.unreadable is not None:
            return False
        return not self.errors and not any(e.is_work for e in self.entries)

    def find(self, key: str) -> Entry | None:
        """The work entry with this identity (``Entry.ident``; a plain ``key`` is the first).

        Only unchecked entries in the active part of the file count: a checked
        line or a look-alike under ``## Completed`` is never found.
        """
        for e in self.entries:
            if e.is_work and e.ident == key:
                return e
        return None


# ---------------------------------------------------------------- plan


@dataclass(frozen=True)
class Unit:
    """One agent turn to make.

    ``slot``: for a scheduled entry, the scheduled instant this run fires (at or
    before the cycle's time); stored as ``last_fired`` so the slot fires once.
    """

    kind: UnitKind
    entry: Entry | None = None
    session: SessionMeta | None = None  # fan-out target for target=all
    continuation: bool = False
    slot: datetime | None = None


@dataclass(frozen=True)
class Decision:
    workspace: str
    decision: Literal["run", "skip"]
    reason: Reason
    session: str | None = None
    entry: str | None = None
    unit: Unit | None = None
    detail: str | None = None
    next_due: datetime | None = None


# ---------------------------------------------------------------- state


@dataclass
class WorkspaceState:
    workspace: str
    last_cycle_at: datetime | None = None
    paused: bool = False
    paused_reason: str | None = None
    paused_at: datetime | None = None
    budget_day: str | None = None
    tokens_today: int = 0
    cost_today: float = 0.0
    hb_session_prompts: int = 0
    hb_session_generation: int = 0
    last_checklist_at: datetime | None = None
    last_decision: str | None = None
    last_reason: str | None = None
    last_decision_at: datetime | None = None
    last_outcome: str | None = None
    last_run_at: datetime | None = None


@dataclass
class EntryState:
    workspace: str
    entry: str
    first_seen: datetime
    last_fired: datetime | None = None
    signature: str | None = None
    retries: int = 0
    continuations: int = 0
    continue_next: bool = False
    running_since: datetime | None = None
    parked_reason: str | None = None
    parked_text_hash: str | None = None
    last_outcome: str | None = None


@dataclass
class WorkspaceInput:
    name: str
    sessions: Sequence[SessionMeta]
    parsed: ParseResult | None  # None when not read (no eligible sessions)
    state: WorkspaceState
    entries: Mapping[str, EntryState] = field(default_factory=dict)
    busy: bool = False
    # the home's shared workspace (sandbox mode ``shared``): its checklist is a standing
    # order, read with no session at all or every session stale
    shared: bool = False
    memo_key: Any = None  # what the decisions depend on (the scanner's quiet-workspace memo)


@dataclass
class LedgerRow:
    cycle_id: str
    at: datetime
    workspace: str
    trigger: str
    decision: str
    reason: str
    session: str | None = None
    entry: str | None = None
    outcome: str | None = None
    duration_s: float | None = None
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    model: str | None = None  # "provider/model" that answered (a fallback's, in an outage)
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        if data["error"]:
            data["error"] = str(data["error"])[:4000]
        return data


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
