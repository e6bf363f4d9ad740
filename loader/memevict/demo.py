"""``memevict demo``: a conversation longer than the window, with critical facts in it."""

from __future__ import annotations

from collections.abc import Callable

import redis

from memevict.policy import Policy
from memevict.scripts import namespace_keys
from memevict.store import MemoryStore

NAMESPACE = "memevict-demo"
START_MS = 1_700_000_000_000
TURN_MS = 20_000

# (id, importance, text, whitelist) per turn; the reference table in the README
# gives the importances: instruction 10, tool error 8, business data 7,
# conclusion 5, context 3, chit-chat 1.
CRITICAL = {
    12: ("api-key", 10.0, "User: my deploy key is sk-demo-7781, never print it", False),
    18: ("tool-error", 8.0, "Tool: deploy failed, disk quota exceeded on /var", False),
    24: ("customer", 7.0, "Customer is ACME Corp, contract #4471", False),
}
WHITELISTED = {
    2: ("user-name", 10.0, "User's name is Ada; address her by name", True),
    30: ("task-1", 7.0, "Current task: migrate the billing database", True),
    34: ("task-2", 7.0, "Current task: rotate the deploy key", True),
}


def _turn(i: int) -> tuple[str, float, str, bool]:
    if i in CRITICAL:
        return CRITICAL[i]
    if i in WHITELISTED:
        return WHITELISTED[i]
    if i % 3 == 0:
        return (f"context-{i}", 3.0, f"Agent looked up background #{i}", False)
    return (f"chat-{i}", 1.0, f"User: thanks! ({i})", False)


def run_demo(client: redis.Redis, echo: Callable[[str], None], turns: int = 48) -> MemoryStore:
    """Runs the walkthrough on a fresh demo namespace and prints what happened."""
    client.delete(*namespace_keys(NAMESPACE))
    policy = Policy(max_hot=10, half_life_s=600, protect_s=30, whitelist_cap=2)
    store = MemoryStore(client, NAMESPACE, policy)
    echo(
        f"Window of {policy.max_hot} memories, {turns} turns {TURN_MS // 1000} s apart, "
        f"half-life {policy.half_life_s:g} s, whitelist cap {policy.whitelist_cap}.\n"
    )
    order: list[str] = []
    now = START_MS
    for i in range(turns):
        now = START_MS + i * TURN_MS
        memory_id, importance, text, whitelist = _turn(i)
        order.append(memory_id)
        r = store.remember(memory_id, importance, text=text, whitelist=whitelist, now=now)
        notes = []
        if r.evicted:
            notes.append(f"evicted {', '.join(r.evicted)}")
        if r.demoted:
            notes.append(f"demoted {', '.join(r.demoted)} (whitelist cap)")
        if whitelist:
            notes.insert(0, "whitelisted")
        elif i in CRITICAL:
            notes.insert(0, "CRITICAL")
        echo(
            f"turn {i:2}  {memory_id:<12} importance {importance:>4g}  "
            f"score {r.score:8.4f}  {'; '.join(notes)}"
        )
        if i == 40:
            store.touch("customer", now=now)
            echo("          (the agent refers back to the customer: touch)")

    stats = store.stats(now=now)
    echo(
        f"\nAfter {turns} turns: {stats.hot} hot, {stats.cold} cold, "
        f"{stats.whitelisted} whitelisted, {stats.protected} protected."
    )
    echo("\nThe window now (top by score):")
    window = store.top(policy.max_hot, now=now)
    for m in window:
        protected = "protected" if m.protected_until > now else ""
        flag = "whitelisted" if m.whitelisted else protected
        echo(f"  {m.id:<12} score {m.score:8.4f}  {flag:<11}  {m.text}")
    kept = {m.id for m in window}
    fifo = set(order[-policy.max_hot :])
    echo(f"\nCritical facts:        memevict   FIFO (last {policy.max_hot} turns)")
    for memory_id, *_ in [*CRITICAL.values(), WHITELISTED[2]]:
        echo(
            f"  {memory_id:<20} {'kept' if memory_id in kept else 'LOST':<10} "
            f"{'kept' if memory_id in fifo else 'LOST'}"
        )
    return store
