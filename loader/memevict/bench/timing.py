"""Timing: calls timed one by one, interleaved rounds, medians over rounds.

The machine is noisy (client and server share two cores), so nothing is
compared across runs: each round runs every peer once, in an order rotated
from round to round, and a ratio between two peers is the median over rounds
of the ratio within each round (both measured seconds apart).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def rotated(items: Sequence[T], round_: int) -> list[T]:
    """The items starting at position round_ (mod len), wrapping around."""
    k = round_ % len(items) if items else 0
    return [*items[k:], *items[:k]]


def time_calls(call: Callable[[int], object], ops: int, first: int = 0) -> list[float]:
    """Runs call(first), call(first + 1), ... ops times; each call's seconds."""
    latencies = []
    clock = time.perf_counter
    for i in range(first, first + ops):
        t0 = clock()
        call(i)
        latencies.append(clock() - t0)
    return latencies


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile, q in (0, 1]."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


@dataclass(frozen=True)
class Sample:
    """One peer's timed calls over every round."""

    seconds_per_call: tuple[float, ...]  # per round; under concurrency, window / calls
    p50_us: float  # of every call of every round
    p99_us: float
    calls: int
    items_per_call: int = 1
    server_us_per_call: tuple[float, ...] = ()  # per round, from INFO commandstats

    @property
    def us_per_call(self) -> float:
        return statistics.median(self.seconds_per_call) * 1e6

    @property
    def ops_per_s(self) -> float:
        """Items per second (calls per second unless a call carries a batch)."""
        return self.items_per_call / statistics.median(self.seconds_per_call)

    @property
    def server_us(self) -> float | None:
        return statistics.median(self.server_us_per_call) if self.server_us_per_call else None

    def to_json(self) -> dict[str, Any]:
        return {
            "ops_per_s": self.ops_per_s,
            "us_per_call": self.us_per_call,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "server_us_per_call": self.server_us,
            "calls": self.calls,
            "rounds": len(self.seconds_per_call),
            "items_per_call": self.items_per_call,
        }


@dataclass
class Samples:
    """Collects each peer's rounds; ``sample(name)`` summarises them."""

    _rounds: dict[str, list[float]] = field(default_factory=dict)
    _latencies: dict[str, list[float]] = field(default_factory=dict)
    _server: dict[str, list[float]] = field(default_factory=dict)
    _items: dict[str, int] = field(default_factory=dict)

    def add(
        self,
        name: str,
        latencies: Sequence[float],
        *,
        window_s: float | None = None,
        items_per_call: int = 1,
        server_us: float | None = None,
    ) -> None:
        """One round of one peer: each call's seconds; ``window_s``: the wall time
        the calls shared (concurrent clients), else they ran one after another."""
        if not latencies:
            raise RuntimeError(f"{name}: no call completed in the round")
        total = window_s if window_s is not None else sum(latencies)
        self._rounds.setdefault(name, []).append(total / len(latencies))
        self._latencies.setdefault(name, []).extend(latencies)
        if server_us is not None:
            self._server.setdefault(name, []).append(server_us)
        self._items[name] = items_per_call

    def sample(self, name: str) -> Sample:
        latencies = self._latencies[name]
        return Sample(
            seconds_per_call=tuple(self._rounds[name]),
            p50_us=percentile(latencies, 0.50) * 1e6,
            p99_us=percentile(latencies, 0.99) * 1e6,
            calls=len(latencies),
            items_per_call=self._items[name],
            server_us_per_call=tuple(self._server.get(name, ())),
        )

    def all(self) -> dict[str, Sample]:
        return {name: self.sample(name) for name in self._rounds}


def paired(a: Sequence[float], b: Sequence[float]) -> float:
    """The median over rounds of a[i] / b[i]: a ratio of two peers measured in the same
    rounds, each round's pair seconds apart."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _paired(a: Sequence[float], b: Sequence[float]) -> float:
    """paired(a, b) when both ran in the same rounds, else the ratio of medians."""
    if len(a) == len(b):
        return paired(a, b)
    return statistics.median(a) / statistics.median(b)


def throughput_ratio(a: Sample, b: Sample) -> float:
    """a's items per second over b's."""
    scale = a.items_per_call / b.items_per_call
    return scale * _paired(b.seconds_per_call, a.seconds_per_call)


def time_ratio(a: Sample, b: Sample) -> float:
    """a's client-side time per call over b's."""
    return _paired(a.seconds_per_call, b.seconds_per_call)


def server_time_ratio(a: Sample, b: Sample) -> float | None:
    """a's server time per call over b's."""
    if not a.server_us_per_call or not b.server_us_per_call:
        return None
    return _paired(a.server_us_per_call, b.server_us_per_call)
