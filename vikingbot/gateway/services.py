"""Supervised services: every long-running loop of the gateway runs under one keeper.

A service is a coroutine factory (the heartbeat loop, cron, housekeeping, the
chat dispatcher, the registry beat, the config watcher...). When it raises, the
crash is logged with its traceback, the owner is told once (``Notifier``: the
notice is keyed by the service and the kind of error, so a crash loop is one
message, and a crash after a long healthy run is news again), and the service
is started again after a pause that grows (tenacity's exponential wait with
jitter, ``first_delay_s`` doubling up to ``max_delay_s``). The pause ends at
once when the gateway stops.

Each service has a state that ``/health`` shows: ``running``, ``restarting``
(waiting to start again, with the error), ``stopped`` (it returned: its work is
done, or the gateway is stopping).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from loguru import logger
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_exponential,
    wait_random,
)

from vikingbot.clock import wait_event

State = Literal["running", "restarting", "stopped"]
Tell = Callable[[str, str], Awaitable[Any]]
"""``tell(key, text)``: tell the owner once per key (``Notifier.tell`` underneath)."""
Forget = Callable[[str], Awaitable[Any]]
"""``forget(key)``: the problem behind ``key`` is over (the next one is news again)."""

NOTICE_WORKSPACE = "gateway"  # notices table scope of the gateway's own notices


@dataclass
class ServiceState:
    name: str
    detail: str = ""
    state: State = "running"
    restarts: int = 0
    last_error: str | None = None
    task: asyncio.Task[Any] | None = field(default=None, repr=False)
    awaited_on_stop: bool = True  # False: its owner cancels it (the channel manager's loops)

    @property
    def running(self) -> bool:
        return self.state == "running"

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "state": self.state,
            "detail": self.detail,
            "restarts": self.restarts,
            "last_error": self.last_error,
        }


def crash_key(name: str, exc: BaseException) -> str:
    return f"service-crash:{name}:{type(exc).__name__}"


class Services:
    """The gateway's long-running services, each restarted with backoff when it crashes.

    ``healthy_s``: a service that ran at least this long before crashing is a new
    incident (its old notice is forgotten, so the owner hears of it again); a
    crash loop stays one notice.
    """

    def __init__(
        self,
        stop: asyncio.Event,
        *,
        tell: Tell | None = None,
        forget: Forget | None = None,
        first_delay_s: float = 1.0,
        max_delay_s: float = 60.0,
        healthy_s: float = 300.0,
    ) -> None:
        self.stop = stop
        self.tell = tell
        self.forget = forget
        self.first_delay_s = first_delay_s
        self.max_delay_s = max_delay_s
        self.healthy_s = healthy_s
        self.states: dict[str, ServiceState] = {}

    def spawn(
        self,
        name: str,
        factory: Callable[[], Awaitable[Any]],
        detail: str = "",
        *,
        restart: bool = True,
        awaited_on_stop: bool = True,
    ) -> ServiceState:
        """Run ``factory()`` as the service ``name``; with ``restart``, again after a crash.

        ``awaited_on_stop=False``: the gateway's stop does not wait for it (a loop that
        does not watch the stop event, whose owner cancels it).
        """
        state = ServiceState(name, detail=detail, awaited_on_stop=awaited_on_stop)
        run = self._supervise(state, factory) if restart else self._once(state, factory)
        state.task = asyncio.create_task(run, name=f"vikingbot:{name}")
        self.states[name] = state
        return state

    def tasks(self) -> set[asyncio.Task[Any]]:
        """The tasks a stopping gateway waits for (then cancels)."""
        return {s.task for s in self.states.values() if s.task is not None and s.awaited_on_stop}

    def health(self) -> dict[str, dict[str, Any]]:
        return {name: s.as_dict() for name, s in self.states.items()}

    def problems(self) -> list[str]:
        """Why the gateway is degraded, one line per service that is not running as it should."""
        return [
            f"service {s.name} restarting after: {s.last_error}"
            for s in self.states.values()
            if s.state == "restarting"
        ]

    # ------------------------------------------------------------ running

    async def _once(self, state: ServiceState, factory: Callable[[], Awaitable[Any]]) -> None:
        try:
            await factory()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("service {} crashed", state.name)
            state.last_error = _describe(exc)
        state.state = "stopped"

    async def _supervise(self, state: ServiceState, factory: Callable[[], Awaitable[Any]]) -> None:
        wait = wait_exponential(multiplier=self.first_delay_s, max=self.max_delay_s) + wait_random(
            0, self.first_delay_s / 2
        )
        started = time.monotonic()
        incident: str | None = None

        async def before_sleep(retry: RetryCallState) -> None:
            nonlocal incident
            exc = retry.outcome.exception() if retry.outcome is not None else None
            assert exc is not None
            delay = retry.next_action.sleep if retry.next_action is not None else 0.0
            state.state, state.last_error = "restarting", _describe(exc)
            logger.opt(exception=exc).error(
                "service {} crashed: {}; restarting in {:.1f}s", state.name, exc, delay
            )
            ran = time.monotonic() - started
            if incident is not None and ran >= self.healthy_s and self.forget is not None:
                await self._quietly(self.forget(incident))  # a new incident after a healthy run
            incident = crash_key(state.name, exc)
            if self.tell is not None:
                await self._quietly(
                    self.tell(
                        incident,
                        f"The gateway's {state.name} service crashed ({state.last_error}). "
                        "It is being restarted with growing pauses; see the gateway log.",
                    )
                )

        async def attempt() -> None:
            nonlocal started
            if self.stop.is_set():
                return  # stopped during the pause: do not start again
            started = time.monotonic()
            if state.state == "restarting":
                state.restarts += 1
                logger.info("service {}: restart {}", state.name, state.restarts)
            state.state = "running"
            await factory()

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Exception),
            wait=wait,
            stop=lambda _retry: self.stop.is_set(),
            sleep=self._pause,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            await retrying(attempt)
        except asyncio.CancelledError:
            state.state = "stopped"
            raise
        except Exception as exc:  # the gateway is stopping and the last try crashed
            state.last_error = _describe(exc)
            logger.warning("service {} ended with an error while stopping: {}", state.name, exc)
        state.state = "stopped"

    async def _pause(self, seconds: float) -> None:
        """Tenacity's sleep: ends early when the gateway stops."""
        await wait_event(self.stop, seconds)

    @staticmethod
    async def _quietly(call: Awaitable[Any]) -> None:
        try:
            await call
        except Exception as exc:  # telling the owner must never take the keeper down
            logger.warning("could not tell the owner about a service crash: {}", exc)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    return f"{name}: {text[:200]}" if text else name
