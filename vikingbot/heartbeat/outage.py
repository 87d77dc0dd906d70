"""A model provider that cannot be reached is an outage, not a task failure.

``ProviderHealth`` remembers (in memory) since when the provider is down and
when to try again. The wait between tries grows with tenacity's exponential
backoff policy, counted in heartbeat cycles' time (the persisted clock), not
by sleeping: cycles keep running, and units that would call the model record
``provider-down`` until the next try is due. One unit's turn is the probe: when
it gets through, the outage is over.

Whether the owner was told lives in the notices table (``Notifier``), so a
restart during an outage does not tell them twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tenacity import RetryCallState, Retrying, wait_exponential

PROVIDER_KEY = "provider-down"
NOTICE_WORKSPACE = "*"
MAX_WAIT_S = 1800.0


def down_text(error: str | None) -> str:
    return (
        f"The model provider cannot be reached ({error or 'no answer'}). The heartbeat keeps "
        "its work waiting (nothing is charged a retry or parked) and tries again with "
        "growing pauses; you will hear once when it is back."
    )


BACK_TEXT = "The model provider answers again; the heartbeat has resumed its work."


class ProviderHealth:
    def __init__(self, interval_s: float) -> None:
        # first try again at the next cycle, then wait twice as long each time
        self._wait = wait_exponential(multiplier=interval_s, max=max(interval_s, MAX_WAIT_S))
        self.down_since: datetime | None = None
        self.error: str | None = None
        self.failures = 0
        self.next_try: datetime | None = None
        # set once a turn got through in this process: then only ``answered()`` ends an
        # outage; before that, an outage told before a restart is looked up once
        self.confirmed = False

    def waiting(self, now: datetime) -> str | None:
        """While down and the next try is not yet due: why units wait (else None)."""
        if self.down_since is None or self.next_try is None or now >= self.next_try:
            return None
        return (
            f"provider down since {self.down_since:%Y-%m-%d %H:%M} UTC ({self.error}); "
            f"next try at {self.next_try:%H:%M} UTC"
        )

    def failed(self, now: datetime, error: str | None) -> bool:
        """Record a failed try; True when this starts an outage."""
        started = self.down_since is None
        if started:
            self.down_since = now
        self.error = error
        self.failures += 1
        state = RetryCallState(Retrying(), None, (), {})
        state.attempt_number = self.failures
        self.next_try = now + timedelta(seconds=self._wait(state))
        return started

    def answered(self) -> bool:
        """The provider answered; True when that ends an outage."""
        was_down = self.down_since is not None
        self.down_since = self.error = self.next_try = None
        self.failures = 0
        return was_down
