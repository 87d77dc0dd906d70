"""Prometheus metrics the gateway serves at `/metrics`.

One registry per process (not the global default one), so tests can build a
fresh gateway without metric name clashes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector


class _DictCollector(Collector):
    """Exposes counters kept as plain dicts by services (e.g. housekeeping)."""

    def __init__(self, prefix: str, source: Callable[[], Mapping[str, float]]) -> None:
        self._prefix = prefix
        self._source = source

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, value in sorted(self._source().items()):
            base = name.removesuffix("_total")
            yield CounterMetricFamily(
                f"{self._prefix}_{base}", f"{self._prefix} {base}", value=value
            )


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.heartbeat_runs = Counter(
            "vikingbot_heartbeat_runs", "Heartbeat runs by outcome", ["outcome"], registry=r
        )
        self.heartbeat_skips = Counter(
            "vikingbot_heartbeat_skips", "Heartbeat skips by reason", ["reason"], registry=r
        )
        self.model_calls = Counter(
            "vikingbot_model_calls", "Model calls made by background turns", ["source"], registry=r
        )
        self.tokens = Counter(
            "vikingbot_tokens",
            "Tokens used by background turns",
            ["source", "direction"],
            registry=r,
        )
        self.turn_duration = Histogram(
            "vikingbot_turn_duration_seconds",
            "Duration of background agent turns",
            ["source"],
            registry=r,
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 1800),
        )
        self.cycles = Counter("vikingbot_heartbeat_cycles", "Heartbeat cycles run", registry=r)

    def add_dict_source(self, prefix: str, source: Callable[[], Mapping[str, float]]) -> None:
        self.registry.register(_DictCollector(prefix, source))

    def render(self) -> bytes:
        return generate_latest(self.registry)
