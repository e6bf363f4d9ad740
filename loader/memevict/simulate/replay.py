"""Replaying a transcript through each policy and measuring what it kept.

Measured the same way for every policy:

- critical_retained: the fraction of the critical facts (not forgotten by the
  transcript) that are in the window at the end; ``retention`` the same
  fraction of the critical facts said so far, after every ``sample_every``
  turns;
- mean_importance: the mean importance of the memories in the final window;
- whitelisted_kept: the memories the transcript leaves whitelisted (not
  demoted or forgotten) that are in the final window, of whitelisted_total;
- wrongful_evictions: evictions of a memory the transcript refers to again
  later (a touch, a whitelist or a re-remember of the same id), each
  eviction counted once;
- recalls_needed: touches and whitelists of a memory that was not there
  (evicted to the cold tier, or for FIFO and LRU simply gone);
- ms_per_turn: wall time of the policy's own calls per memory turn, with the
  actions that follow it (the measurements themselves are not counted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import redis

from memevict.policy import Policy
from memevict.simulate.policies import (
    FifoRunner,
    LruRunner,
    MemevictRunner,
    Runner,
    clear,
)
from memevict.simulate.transcript import MemoryTurn, Transcript

SAMPLES = 200  # retention points per policy, at most


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one policy kept, and what it cost."""

    turns: int
    actions: int
    critical_total: int
    critical_kept: tuple[str, ...]
    critical_retained: float | None  # None when the transcript marks nothing critical
    retention: tuple[tuple[int, float], ...]  # (turns so far, fraction of critical facts kept)
    mean_importance: float
    whitelisted_total: int
    whitelisted_kept: int
    evictions: int
    wrongful_evictions: int
    recalls_needed: int
    ms_per_turn: float
    window: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Simulation:
    transcript: Transcript
    window: int
    outcomes: dict[str, Outcome]  # by policy: fifo, lru, memevict...


def simulate(
    client: redis.Redis,
    transcript: Transcript,
    window: int,
    memevict: Mapping[str, Policy],
    *,
    prefix: str = "memevict-simulate",
    advance: Callable[[int], None] = lambda n: None,
) -> Simulation:
    """Replays the transcript through FIFO, LRU and every memevict policy
    (by report key, each with max_hot == window), one after the other, each
    in its namespace ``<prefix>-<n>`` on the same server. The namespaces are
    cleared before and after. ``advance(n)`` is told of every n events done."""
    makers: dict[str, Callable[[str], Runner]] = {
        "fifo": lambda ns: FifoRunner(client, ns, window),
        "lru": lambda ns: LruRunner(client, ns, window),
    }
    for key, policy in memevict.items():
        if policy.max_hot != window:
            raise ValueError(f"{key}: max_hot {policy.max_hot} is not the window {window}")
        makers[key] = lambda ns, policy=policy: MemevictRunner(client, ns, policy)  # type: ignore[misc]
    outcomes: dict[str, Outcome] = {}
    for n, (key, make) in enumerate(makers.items()):
        namespace = f"{prefix}-{n}"
        clear(client, namespace)
        try:
            outcomes[key] = replay(transcript, make(namespace), advance=advance)
        finally:
            clear(client, namespace)
    return Simulation(transcript, window, outcomes)


def replay(
    transcript: Transcript,
    runner: Runner,
    *,
    sample_every: int | None = None,
    advance: Callable[[int], None] = lambda n: None,
) -> Outcome:
    """Replays every event of the transcript through one runner."""
    total_turns = transcript.turns
    every = sample_every or max(1, -(-total_turns // SAMPLES))
    importance: dict[str, float] = {}
    critical: set[str] = set()
    whitelisted: set[str] = set()
    evicted_unreferenced: set[str] = set()
    retention: list[tuple[int, float]] = []
    turns = actions = evictions = wrongful = recalls = 0
    spent = 0.0
    now = 0

    def sample() -> None:
        if critical:
            kept = critical.intersection(runner.window(now))
            retention.append((turns, len(kept) / len(critical)))

    def referenced(memory_id: str) -> None:
        nonlocal wrongful
        if memory_id in evicted_unreferenced:
            wrongful += 1
            evicted_unreferenced.discard(memory_id)

    for event in transcript.events:
        if isinstance(event, MemoryTurn) and turns and turns % every == 0:
            sample()  # after turn number `turns` and the actions that followed it
        now = event.at
        if isinstance(event, MemoryTurn):
            referenced(event.id)
            started = time.perf_counter()
            evicted = runner.remember(event)
            spent += time.perf_counter() - started
            turns += 1
            importance[event.id] = event.importance
            if event.critical:
                critical.add(event.id)
            if event.whitelist:
                whitelisted.add(event.id)
        else:
            actions += 1
            if event.action in ("touch", "whitelist"):
                referenced(event.id)
                if not runner.holds(event.id, now):
                    recalls += 1
            started = time.perf_counter()
            evicted = runner.act(event)
            spent += time.perf_counter() - started
            if event.action == "whitelist":
                whitelisted.add(event.id)
            elif event.action == "demote":
                whitelisted.discard(event.id)
            elif event.action == "forget":
                importance.pop(event.id, None)
                for ids in (critical, whitelisted, evicted_unreferenced):
                    ids.discard(event.id)
        evictions += len(evicted)
        evicted_unreferenced.update(evicted)
        advance(1)
    if not retention or retention[-1][0] != turns:
        sample()

    window = tuple(runner.window(now))
    kept = tuple(sorted(critical.intersection(window)))
    return Outcome(
        turns=turns,
        actions=actions,
        critical_total=len(critical),
        critical_kept=kept,
        critical_retained=len(kept) / len(critical) if critical else None,
        retention=tuple(retention),
        mean_importance=sum(importance[m] for m in window) / len(window) if window else 0.0,
        whitelisted_total=len(whitelisted),
        whitelisted_kept=len(whitelisted.intersection(window)),
        evictions=evictions,
        wrongful_evictions=wrongful,
        recalls_needed=recalls,
        ms_per_turn=spent * 1000 / turns,
        window=window,
    )
