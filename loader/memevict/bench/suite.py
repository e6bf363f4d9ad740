"""The suite: every measurement in one run against one server, then the targets."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from memevict.bench.blocking import measure_blocking
from memevict.bench.budget import measure_budget
from memevict.bench.concurrent import measure_concurrent
from memevict.bench.footprint import measure_footprint
from memevict.bench.peers import prepare_peers
from memevict.bench.report import Results
from memevict.bench.server import BenchKeys, bench_server, environment, wait_until_idle
from memevict.bench.single import measure_single_client
from memevict.bench.sizes import fill_size_stores, measure_sizes
from memevict.bench.targets import judge
from memevict.bench.window import measure_window


@dataclass(frozen=True)
class BenchConfig:
    quick: bool
    rounds: int  # one client: interleaved rounds, and calls per peer per round
    ops: int
    capacity: int  # memories in the full store remember() runs on
    batch: int  # items per remember_many call (T6)
    clients: int  # concurrent clients, spread over processes
    processes: int
    concurrent_rounds: int
    concurrent_window_s: float
    sizes: tuple[int, ...]  # store sizes for T2, T3, T4 (the largest) and the plot
    size_rounds: int
    size_ops: int
    seed_decay_each_round: int  # the seed's decay pass runs every round up to this size,
    seed_decay_max: int  # and once more up to this one
    footprint_memories: int  # T5
    blocking_calls: int  # T4: calls per method
    burst_memories: int  # T4: remembered within one protection window (bounded work)
    budget_rounds: int  # T7: interleaved rounds, and remembers per arm per round
    budget_ops: int
    window_memories: int  # T8: hot memories window() runs on
    window_budgets: tuple[int, ...]  # tokens
    window_rounds: int
    window_calls: int  # per case per round

    @classmethod
    def full(cls) -> BenchConfig:
        return cls(
            quick=False, rounds=9, ops=2000, capacity=1000, batch=100,
            clients=50, processes=10, concurrent_rounds=5, concurrent_window_s=2.0,
            sizes=(1_000, 10_000, 100_000, 1_000_000), size_rounds=5, size_ops=300,
            seed_decay_each_round=10_000, seed_decay_max=100_000,
            footprint_memories=100_000, blocking_calls=20, burst_memories=50_000,
            budget_rounds=9, budget_ops=1000,
            window_memories=10_000, window_budgets=(4_000, 32_000), window_rounds=5,
            window_calls=20,
        )  # fmt: skip

    @classmethod
    def quick_run(cls) -> BenchConfig:
        """Tiny sizes: a smoke run of every measurement, for CI (its numbers mean little)."""
        return cls(
            quick=True, rounds=3, ops=100, capacity=100, batch=100,
            clients=10, processes=5, concurrent_rounds=2, concurrent_window_s=0.3,
            sizes=(100, 1_000), size_rounds=3, size_ops=30,
            seed_decay_each_round=1_000, seed_decay_max=1_000,
            footprint_memories=1_000, blocking_calls=3, burst_memories=1_000,
            budget_rounds=2, budget_ops=30,
            window_memories=400, window_budgets=(4_000, 32_000), window_rounds=2,
            window_calls=3,
        )  # fmt: skip


def run_bench(url: str | None, config: BenchConfig, progress: Callable[[str], None]) -> Results:
    """Runs everything on ``url``'s server (None: a fresh embedded Valkey) and
    deletes every key it wrote."""
    started = time.perf_counter()

    def step(what: str, since: float) -> None:
        progress(f"{what} in {time.perf_counter() - since:.1f} s")

    keys = BenchKeys()
    with bench_server(url) as server:
        client = server.client
        env = environment(server)
        progress(f"server: {env['server']} {env['server_version']} ({env['where']})")
        try:
            t0 = time.perf_counter()
            footprint = measure_footprint(client, keys, config.footprint_memories)
            step(f"memory of {config.footprint_memories:,} memories", t0)
            t0 = time.perf_counter()
            setup = prepare_peers(client, keys, config.capacity)
            single = measure_single_client(
                client, setup, rounds=config.rounds, ops=config.ops, batch=config.batch
            )
            step("remember(), 1 client", t0)
            t0 = time.perf_counter()
            concurrent = measure_concurrent(
                client,
                server.url,
                setup,
                processes=config.processes,
                connections=config.clients // config.processes,
                rounds=config.concurrent_rounds,
                window_s=config.concurrent_window_s,
            )
            step(f"remember(), {config.clients} clients", t0)
            t0 = time.perf_counter()
            budget = measure_budget(
                client,
                keys,
                capacity=config.capacity,
                rounds=config.budget_rounds,
                ops=config.budget_ops,
                progress=progress,
            )
            step("remember() with token budgets and groups", t0)
            t0 = time.perf_counter()
            windows = measure_window(
                client,
                keys,
                memories=config.window_memories,
                budgets=config.window_budgets,
                rounds=config.window_rounds,
                calls=config.window_calls,
                progress=progress,
            )
            step(f"window() at {config.window_memories:,} memories", t0)
            stores = fill_size_stores(client, keys, config.sizes, progress)
            t0 = time.perf_counter()
            sizes = measure_sizes(
                client,
                stores,
                rounds=config.size_rounds,
                ops=config.size_ops,
                seed_decay_each_round=config.seed_decay_each_round,
                seed_decay_max=config.seed_decay_max,
                progress=progress,
            )
            step("store sizes", t0)
            t0 = time.perf_counter()
            largest = max(stores, key=lambda s: s.size)
            blocking = measure_blocking(
                client,
                server.url,
                largest.namespace,
                largest.size,
                config.blocking_calls,
                keys.namespace("burst"),
                config.burst_memories,
            )
            step(f"blocking at {largest.size:,} memories", t0)
        finally:
            wait_until_idle(client)  # a failed call may have left a long script running
            keys.delete_all(client)
    return Results(
        environment=env,
        config=dataclasses.asdict(config),
        seconds=time.perf_counter() - started,
        single=single,
        concurrent=concurrent,
        sizes=sizes,
        blocking=blocking,
        footprint=footprint,
        budget=budget,
        windows=windows,
        targets=judge(single, concurrent, sizes, blocking, footprint, budget, windows),
    )
