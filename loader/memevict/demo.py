"""``memevict demo``: a short ``memevict simulate`` run, told for a first reader."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import redis

from memevict.simulate import Simulation, generate, memevict_policies, simulate
from memevict.simulate.report import table
from memevict.simulate.transcript import MemoryTurn

PREFIX = "memevict-demo"  # then a random part: two demos on one server never meet
SEED = 1


def run_demo(
    client: redis.Redis, echo: Callable[[str], None], turns: int = 120, window: int = 20
) -> Simulation:
    """Replays a generated conversation of ``turns`` turns through FIFO, LRU
    and memevict (default policy, max_hot = window) and prints what each kept."""
    transcript = generate(SEED, turns)
    echo(
        f"A generated agent conversation of {turns} turns (seed {SEED}) goes through a window "
        f"of {window} memories\nunder FIFO, LRU and memevict's default policy. Critical facts "
        "are said once, in the middle.\n"
    )
    policies = memevict_policies(window, {}, [])
    prefix = f"{PREFIX}-{secrets.token_hex(4)}"
    result = simulate(client, transcript, window, policies, prefix=prefix)
    echo(table(result))
    said = {e.id: e.text for e in transcript.events if isinstance(e, MemoryTurn)}
    critical = [e.id for e in transcript.events if isinstance(e, MemoryTurn) and e.critical]
    keys = list(result.outcomes)
    echo(f"\nCritical facts at the end:  {'  '.join(f'{k:<8}' for k in keys)}")
    for memory_id in critical:
        kept = ["kept" if memory_id in result.outcomes[k].critical_kept else "LOST" for k in keys]
        echo(f"  {memory_id:<24}  {'  '.join(f'{k:<8}' for k in kept)}{said[memory_id]}")
    echo(
        "\nLonger conversations, other settings (--grid half_life_memories=200,2000) and\nyour "
        "own log (--transcript FILE.jsonl): memevict simulate --help."
    )
    return result
