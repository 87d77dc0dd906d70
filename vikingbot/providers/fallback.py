"""Model fallbacks: the models a turn may answer with, in order, when one is down.

A turn's chain is its own model (``bot.agents`` or, for a heartbeat turn,
``bot.heartbeat``'s provider and model) followed by ``bot.agents.fallback_models``.
Only an outage moves a call down the chain: ``ProviderUnavailable`` (a connection
error, a timeout, 429 or 5xx once the SDK's retries are spent). A refusal, a bad
request, a rejected key or a prompt too long ends the turn as before: another model
would not fix them, and answering with it would hide the problem.

:class:`Outages` remembers (in memory) which models failed and since when. A model
that failed is passed over for ``bot.agents.fallback_probe_s`` (so turns during an
outage do not each pay the primary's retry budget first), then tried again: the
first call that gets through ends its outage. :func:`order` is the pure rule.
Telling the owner (once per outage, and once when it is over) is the caller's
``on_event``; this module only says when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from vikingbot.errors import ProviderUnavailable


@dataclass(frozen=True)
class Link:
    """One model of a chain: a ``bot.providers`` section (or kind) and a model name."""

    provider: str
    model: str

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}" if self.model else self.provider


def chain(primary: Link, fallbacks: Iterable[Link]) -> list[Link]:
    """The turn's model first, then each fallback once (a repeat of an earlier link is
    dropped). Pure."""
    out = [primary]
    for link in fallbacks:
        if link not in out:
            out.append(link)
    return out


def order(links: list[Link], resting_until: Mapping[Link, float], now: float) -> list[Link]:
    """The links to try, in order: those not resting (failed less than the probe time
    ago) in chain order, then the resting ones in chain order, so a chain that is down
    everywhere is still tried rather than refused unasked. Pure."""
    awake = [link for link in links if resting_until.get(link, 0.0) <= now]
    return awake + [link for link in links if link not in awake]


def is_outage(exc: BaseException) -> bool:
    """True for the errors a fallback may answer for (an outage, not a refusal)."""
    return isinstance(exc, ProviderUnavailable)


EventKind = Literal["fallback", "back", "answering"]


@dataclass(frozen=True)
class OutageEvent:
    """``fallback``: ``down`` failed and ``answered_by`` answered instead (the first time in
    this outage); ``back``: ``down`` answers again; ``answering``: ``down`` gave its first
    answer in this process (an outage told before a restart may be over)."""

    kind: EventKind
    down: Link
    answered_by: Link
    error: str | None = None
    since: datetime | None = None

    def text(self) -> str:
        """The owner's notice."""
        if self.kind in ("back", "answering"):
            return (
                f"The model {self.down.label} answers again; vikingbot uses it from now on "
                "instead of the fallback."
            )
        return (
            f"The model {self.down.label} cannot answer ({self.error or 'no answer'}). "
            f"vikingbot answers with {self.answered_by.label} until it is back, and tells "
            "you once when it is."
        )

    @property
    def key(self) -> str:
        """One notice per outage of one model (the notices table's key)."""
        return f"model-outage:{self.down.label}"


OnEvent = Callable[[OutageEvent], None]


class Outages:
    """Which models are down (since when, resting until when), in this process."""

    def __init__(self, probe_s: Callable[[], float]) -> None:
        self._probe_s = probe_s
        self.resting_until: dict[Link, float] = {}
        self.down_since: dict[Link, datetime] = {}
        self.errors: dict[Link, str] = {}
        self.told: set[Link] = set()  # fallback notice sent during this outage
        self.confirmed: set[Link] = set()  # answered at least once in this process
        self.on_event: OnEvent | None = None

    def order(self, links: list[Link], now: float) -> list[Link]:
        return order(links, self.resting_until, now)

    def failed(self, link: Link, error: str, now: float, at: datetime) -> None:
        self.resting_until[link] = now + self._probe_s()
        self.down_since.setdefault(link, at)
        self.errors[link] = error

    def answered(self, link: Link, tried: list[Link]) -> None:
        """``link`` answered after the links in ``tried`` failed (in this call)."""
        was_down = link in self.down_since
        self.resting_until.pop(link, None)
        self.down_since.pop(link, None)
        self.errors.pop(link, None)
        if was_down and link in self.told:
            self.told.discard(link)
            self._emit(OutageEvent("back", link, link))
        elif link not in self.confirmed:
            self._emit(OutageEvent("answering", link, link))
        self.confirmed.add(link)
        if tried and tried[0] not in self.told:
            first = tried[0]
            self.told.add(first)
            self._emit(
                OutageEvent(
                    "fallback", first, link, self.errors.get(first), self.down_since.get(first)
                )
            )

    def _emit(self, event: OutageEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def status(self) -> list[dict[str, str]]:
        """The models down now, for health and status."""
        return [
            {"model": link.label, "since": at.isoformat(), "error": self.errors.get(link, "")}
            for link, at in self.down_since.items()
        ]
