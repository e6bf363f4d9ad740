"""What the lexical index costs (issue 39): remember() of a memory with text, indexed by its
terms against the same memory with none (terms=[]), side by side on one server in one run;
the server memory per memory of each namespace; and search() at that size.

    python benchmarks/index_cost.py [--binary valkey|redis|PATH] [--sizes 10000 100000]
        [--rounds 5] [--calls 500] [--texts FILE ...] [--json FILE]

Starts its own server (the embedded Valkey's binary, or ``--binary redis``). Texts: the
messages of LoCoMo-format files (``--texts``), else generated ones (8 to 30 words drawn
from a Zipf vocabulary of 20,000 words). Each side's namespace holds ``size`` memories
(max_hot 1,000, cold_max the rest; index 1 on the indexed side), filled the same way;
then ``--rounds`` interleaved rounds of ``--calls`` remembers of new memories per side
(each evicting one and trimming one), server µs per call from INFO commandstats,
indexed / unindexed paired by round.
Queries (as many as --calls, at most 200): 5 terms of a random message and 2 random words;
search (k = 10), and context at a budget of 130 one-token memories (about an adapter's
4,000 tokens of messages) with the query's share 0.25, against the same context without.
Bounded work: remember_many of 100 new memories whose texts hold more terms than a call
indexes (memevict.terms.CALL_TERMS: cut to fit), each call's server µs from SLOWLOG,
median and max.
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import redis
from _harness import Run, binary, interleave, node, paired, parser, server_us, started

from memevict import Item, MemoryStore, Policy
from memevict.scripts import namespace_keys
from memevict.terms import CALL_TERMS, terms

SIDES = ("unindexed", "indexed")


def generated(count: int, rng: random.Random) -> list[str]:
    vocabulary = [f"word{i}" for i in range(20_000)]
    weights = [1 / (i + 1) for i in range(len(vocabulary))]
    return [" ".join(rng.choices(vocabulary, weights, k=rng.randint(8, 30))) for _ in range(count)]


def messages(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        conversation = json.loads(path.read_text())
        conversation = conversation.get("conversation", conversation)
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [t["text"] for t in turns if t.get("text")]
    return out


def item(id: str, text: str, indexed: bool) -> Item:
    return Item(id, 1.0, text=text, tokens=1, terms=None if indexed else [])


def fill(store: MemoryStore, texts: list[str], size: int, indexed: bool) -> None:
    for start in range(0, size, 100):
        store.remember_many(
            [item(f"f{i}", texts[i % len(texts)], indexed) for i in range(start, start + 100)]
        )


def memory_per_memory(client: redis.Redis, namespace: str, size: int) -> float:
    used = sum(client.memory_usage(k, samples=0) or 0 for k in namespace_keys(namespace))
    return used / size


def measure(
    client: redis.Redis, texts: list[str], size: int, rounds: int, calls: int, rng: random.Random
) -> dict[str, Any]:
    """Both sides at ``size`` memories: remember's server µs by round, memory, search."""
    client.flushall()
    policy = Policy(max_hot=1000, cold_max=size - 1000, protect_s=0)
    stores = {
        side: MemoryStore(client, f"{side}-{size}", replace(policy, index=int(side == "indexed")))
        for side in SIDES
    }
    for side, store in stores.items():
        fill(store, texts, size, side == "indexed")

    def one(side: str, r: int) -> float:
        store, indexed = stores[side], side == "indexed"
        batch = [texts[rng.randrange(len(texts))] for _ in range(calls)]

        def run() -> None:
            for i, text in enumerate(batch):
                store.remember(f"r{r}-{i}", 1.0, text=text, terms=None if indexed else [])

        return server_us(client, run, calls)

    us = interleave(rounds, list(SIDES), one)
    queries = []
    for _ in range(min(200, calls)):  # (the smoke test's few calls: as few queries)
        words = terms(texts[rng.randrange(len(texts))])
        other = terms(texts[rng.randrange(len(texts))])[:2]
        queries.append(" ".join(rng.sample(words, min(5, len(words))) + other))

    indexed = stores["indexed"]

    def searches() -> None:
        for q in queries:
            indexed.search(q, 10)

    def contexts(query: bool) -> None:
        for q in queries:
            indexed.context(CONTEXT_BUDGET, query=q if query else None, share=0.25)

    search_us = [server_us(client, searches, len(queries)) for _ in range(rounds)]
    context_us = interleave(
        rounds, [False, True], lambda q, _: server_us(client, partial(contexts, q), len(queries))
    )
    batch = batch_us(client, indexed, texts, rng)
    memory = {side: memory_per_memory(client, f"{side}-{size}", size) for side in SIDES}
    ratio = paired(us["indexed"], us["unindexed"])
    print(f"  {size:>7} memories")
    for side in SIDES:
        print(
            f"    remember {side:10} {statistics.median(us[side]):7.1f} µs   "
            f"{memory[side]:6.0f} B a memory"
        )
    print(
        f"    remember indexed / unindexed {ratio:.3f}; "
        f"memory {memory['indexed'] / memory['unindexed']:.3f}"
    )
    print(f"    search (k=10) {statistics.median(search_us):7.1f} µs")
    plain, asked = (statistics.median(context_us[q]) for q in (False, True))
    print(f"    context ({CONTEXT_BUDGET}) {plain:7.1f} µs, with a query {asked:7.1f} µs")
    print(
        f"    remember_many of 100, {CALL_TERMS} terms: median {batch['median']} µs, "
        f"max {batch['max']} µs"
    )
    return {
        "remember_us": {side: us[side] for side in SIDES},
        "remember_indexed_vs_unindexed": ratio,
        "bytes_per_memory": memory,
        "search_us": search_us,
        "context_us": {"plain": context_us[False], "query": context_us[True]},
        "remember_many_us": batch,
    }


CONTEXT_BUDGET = 130


def batch_us(
    client: redis.Redis, store: MemoryStore, texts: list[str], rng: random.Random
) -> dict[str, int]:
    """remember_many of 100 new memories, their texts 3 messages each (more terms than a
    call indexes), 20 calls: each call's server µs (SLOWLOG), median and max."""
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1000)
    client.slowlog_reset()
    for call in range(20):
        items = [
            Item(f"b{call}-{i}", 1.0, text=" ".join(rng.choices(texts, k=3)), tokens=1)
            for i in range(100)
        ]
        store.remember_many(items)
    took = sorted(
        int(e["duration"])
        for e in client.slowlog_get(1000)
        if e["command"].split(b" ")[0].upper() in (b"FCALL", b"EVALSHA")
    )
    client.config_set("slowlog-log-slower-than", 10_000)
    return {"median": took[len(took) // 2], "max": took[-1], "calls": len(took)}


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--binary", default="valkey", help="valkey, redis or a server binary")
    cli.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--calls", type=int, default=500)
    cli.add_argument("--texts", type=Path, nargs="*", default=[])
    opts = cli.parse_args()
    run = Run(opts)
    rng = random.Random(1)
    texts = messages(opts.texts) if opts.texts else generated(20_000, rng)
    found: dict[str, Any] = {}
    with started(binary(opts.binary), replicas=0) as (primary, *_):
        client = primary.client()
        run.on(node(client, primary.url))
        env = run.environment
        print(f"{env['server']} {env['server_version']}; {len(texts)} texts; median of rounds")
        for size in opts.sizes:
            found[str(size)] = measure(client, texts, size, opts.rounds, opts.calls, rng)
    summary = "; ".join(
        f"{size}: remember {found[str(size)]['remember_indexed_vs_unindexed']:.2f}x, "
        f"search {statistics.median(found[str(size)]['search_us']):.0f} µs, context with a "
        f"query {statistics.median(found[str(size)]['context_us']['query']):.0f} µs, "
        f"remember_many max {found[str(size)]['remember_many_us']['max']} µs"
        for size in opts.sizes
    )
    run.row("What the lexical index costs", summary)
    run.finish({"sizes": found})


if __name__ == "__main__":
    main()
