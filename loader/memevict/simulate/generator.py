"""The built-in workload: a seeded agent conversation longer than the window.

What it promises (tests/test_simulate.py checks each):

- ``turns`` memory turns whose categories follow SHARES (chit-chat and
  context most, instructions least), importance from the reference table;
- tool errors come in bursts of 3 to 5 consecutive turns;
- some business facts are restated later (a re-remember of the same id);
- the first turn is the user's profile, whitelisted for the whole run;
- tasks: a task's instruction is whitelisted when it starts and demoted
  when it ends, then the next task starts;
- critical facts injected in the middle (between 40% and 60% of the turns),
  one per 40 turns: an instruction, a tool error and business data in turn;
- later references: every critical fact and some business facts and
  conclusions are touched once, some turns after they were said;
- time advances by 0.5..1.5 x ``turn_ms`` per turn; actions happen at the
  time of the turn they follow.

The same seed and arguments give the same transcript, event for event.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from memevict.simulate.transcript import (
    IMPORTANCE,
    START_MS,
    TURN_MS,
    Action,
    Event,
    MemoryTurn,
    Transcript,
)

SHARES: Mapping[str, float] = {
    "chitchat": 0.30,
    "context": 0.30,
    "conclusion": 0.15,
    "business": 0.12,
    "tool_error": 0.08,
    "instruction": 0.05,
}
BURST = (3, 5)  # consecutive tool errors in a burst
MIDDLE = (0.4, 0.6)  # where critical facts are injected, as fractions of the turns
TURNS_PER_CRITICAL = 40
CRITICAL_CATEGORIES = ("instruction", "tool_error", "business")
RESTATED = 0.2  # chance that a business turn restates a recent business fact
RESTATE_WITHIN = 60  # turns back
TOUCHED = {"business": 0.15, "conclusion": 0.15}  # chance a fact is referenced later
TOUCH_DELAY = (3, 60)  # turns after an ordinary fact
TASK_TURNS = (0.1, 0.2)  # a task's length, as fractions of the turns

_TEXT = {
    "instruction": "User: from now on, {}",
    "tool_error": "Tool error: {}",
    "business": "Business data: {}",
    "conclusion": "Agent concluded: {}",
    "context": "Context: {}",
    "chitchat": "User: {}",
}
_WORDS = {
    "instruction": ["answer in French", "cc the team lead", "use the staging cluster"],
    "tool_error": ["deploy failed, disk quota exceeded", "timeout calling the billing API"],
    "business": ["order #{n} ships Friday", "ACME's contract #{n} renews in May"],
    "conclusion": ["step {n} is done", "the cache is not the culprit"],
    "context": ["looked up background note #{n}", "read the README of service {n}"],
    "chitchat": ["thanks!", "ok, go on", "sounds good"],
}
_CRITICAL_TEXT = {
    "instruction": "User: my deploy key is sk-{n:04d}; never print it",
    "tool_error": "Tool error that explains the outage: replica {n} is out of disk",
    "business": "Business data: the customer is ACME Corp, contract #{n}",
}


def generate(seed: int = 1, turns: int = 400, turn_ms: int = TURN_MS) -> Transcript:
    """A reproducible agent transcript of ``turns`` memory turns."""
    if turns < 10:
        raise ValueError("turns must be at least 10")
    rng = random.Random(seed)
    categories = ["instruction", *_categories(rng, turns - 1)]  # the user's profile first
    critical = _critical_turns(rng, categories)
    tasks = _tasks(rng, categories, critical)
    ids = [f"{category}-{i}" for i, category in enumerate(categories)]
    ids[0] = "user-profile"
    texts = [_text(rng, category, i) for i, category in enumerate(categories)]
    texts[0] = "User: my name is Ada; address me by name"
    for i in critical:
        ids[i] = f"critical-{i}"
        texts[i] = _CRITICAL_TEXT[categories[i]].format(n=rng.randrange(10_000))
    for start, _ in tasks:
        ids[start] = f"task-{start}"
        texts[start] = f"Current task: migrate service {start} to the new cluster"
    _restate(rng, categories, ids, critical, tasks)

    after: dict[int, list[Action]] = {}  # actions that follow turn i
    times = _times(rng, turns, turn_ms)
    for start, end in tasks:
        if end < turns:
            after.setdefault(end, []).append(Action("demote", ids[start], times[end]))
    for i, category in enumerate(categories):
        if i in critical:
            delay = rng.randint(10, max(10, turns // 4))
        elif rng.random() < TOUCHED.get(category, 0.0):
            delay = rng.randint(*TOUCH_DELAY)
        else:
            continue
        j = i + delay
        if j < turns:
            after.setdefault(j, []).append(Action("touch", ids[i], times[j]))

    starts = {start for start, _ in tasks}
    events: list[Event] = []
    for i, category in enumerate(categories):
        events.append(
            MemoryTurn(
                ids[i],
                IMPORTANCE[category],
                times[i],
                text=texts[i],
                whitelist=i == 0 or i in starts,
                critical=i in critical,
                category=category,
            )
        )
        events.extend(after.get(i, []))
    return Transcript(tuple(events), f"generated (seed {seed}, {turns} turns)")


def _categories(rng: random.Random, turns: int) -> list[str]:
    """Categories by SHARES, tool errors in bursts of BURST turns."""
    error_share = SHARES["tool_error"]
    mean_burst = sum(BURST) / 2
    # Each draw starts a burst (and the turn after it) with this chance, else
    # one other turn, so that tool errors make up error_share of the turns.
    start_burst = error_share / (mean_burst * (1 - error_share))
    others = [c for c in SHARES if c != "tool_error"]
    weights = [SHARES[c] for c in others]
    categories: list[str] = []
    while len(categories) < turns:
        if rng.random() < start_burst:
            categories.extend(["tool_error"] * rng.randint(*BURST))
            categories.append(rng.choices(others, weights)[0])  # bursts never touch
        else:
            categories.append(rng.choices(others, weights)[0])
    return categories[:turns]


def _critical_turns(rng: random.Random, categories: list[str]) -> set[int]:
    """Turns in the middle that become critical facts, of each critical
    category in turn; a category missing there is made of an ordinary turn."""
    turns = len(categories)
    middle = range(int(MIDDLE[0] * turns), int(MIDDLE[1] * turns))
    chosen: set[int] = set()
    for n in range(max(1, turns // TURNS_PER_CRITICAL)):
        category = CRITICAL_CATEGORIES[n % len(CRITICAL_CATEGORIES)]
        free = [i for i in middle if i not in chosen]
        same = [i for i in free if categories[i] == category]
        if not same:
            same = [i for i in free if categories[i] not in CRITICAL_CATEGORIES]
        i = rng.choice(same)
        categories[i] = category
        chosen.add(i)
    return chosen


def _tasks(rng: random.Random, categories: list[str], critical: set[int]) -> list[tuple[int, int]]:
    """(start, end) turns of tasks, one after the other: each starts at an
    instruction turn and is demoted after its end turn. The last one may end
    at or after the last turn: it is still open when the transcript ends."""
    turns = len(categories)
    tasks: list[tuple[int, int]] = []
    i = 1
    while True:
        starts = (
            j for j in range(i, turns) if categories[j] == "instruction" and j not in critical
        )
        start = next(starts, None)
        if start is None:
            return tasks
        end = start + max(1, round(rng.uniform(*TASK_TURNS) * turns))
        tasks.append((start, end))
        if end >= turns:
            return tasks
        i = end + 1


def _restate(
    rng: random.Random,
    categories: list[str],
    ids: list[str],
    critical: set[int],
    tasks: list[tuple[int, int]],
) -> None:
    """Some business turns restate a recent business fact: same id, new text."""
    special = critical | {start for start, _ in tasks}
    for i, category in enumerate(categories):
        if category != "business" or i in special or rng.random() >= RESTATED:
            continue
        earlier = [
            j
            for j in range(max(1, i - RESTATE_WITHIN), i)
            if categories[j] == "business" and j not in special and ids[j] == f"business-{j}"
        ]
        if earlier:
            ids[i] = ids[rng.choice(earlier)]


def _times(rng: random.Random, turns: int, turn_ms: int) -> list[int]:
    times = [START_MS]
    for _ in range(turns - 1):
        times.append(times[-1] + round(rng.uniform(0.5, 1.5) * turn_ms))
    return times


def _text(rng: random.Random, category: str, i: int) -> str:
    return _TEXT[category].format(rng.choice(_WORDS[category]).format(n=i))
