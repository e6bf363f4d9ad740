"""Recall on read (issue 39; ``memevict simulate --per-question --recall-on-read``): when
``context(tokens, query=...)`` brings memories into a context, should they also be
recalled, made hot and fresh again? Two sides, side by side on one server:

- ``read_only`` (A, the store's behaviour): a read is ``context(room, query=...)`` alone;
- ``recall`` (B): after each such read, every id of its ``recalled`` is recalled
  (``store.recall``, one call an id: the store has no batch of recalls).

For each budget and placement of the questions, the transcript (labelled) is replayed
into two namespaces of the adapters' policy
(``memevict.integrations._conversation.conversation_policy``: the hot tier within the
budget, a lexical index), one a side, event by event in lockstep, as an agent reads its
store: before each user message (role "user"), the context for it,
``context(budget - its tokens, query=its text)``, then the message is remembered; other
turns are only remembered. Each memory costs ``tokens_of(text)``, at most the budget.
The questions (never remembered) are asked in turn, the store never reset between them,
so B's recalls, of the turns' reads and of the questions, accumulate:

- ``during``: a question the transcript asks at a time (``at``) is asked then; one
  without (LoCoMo's), right after the last turn of the session of its latest evidence
  turn (when the evidence has been said, some turns later);
- ``end``: every question after the last turn, in the transcript's order.

Asking is ``context(budget - the question's tokens, query=the question)`` (B recalls what
it brought). Per side:

- ``asked``: whether that context held an evidence turn of each question;
- ``plain``: whether the plain window, ``context(budget)``, held one: ``during``, read
  just before the question (what earlier recalls left for a message that does not repeat
  the words); ``end``, read once after all the questions;
- ``recent``: of the turns' reads with two turns before them, those whose context held
  both (the previous exchange); ``end``: also whether the plain window after the
  questions holds the last two turns (``recent_after``);
- the cost: the server's µs in the reads (``context``) and in the recalls, from INFO
  commandstats' script entries read before and after each (exact only when nothing else
  runs on the server), and the recall calls.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from memevict.bench.server import command_stats, script_usec
from memevict.integrations._conversation import approx_tokens, conversation_policy
from memevict.simulate.baselines import TokenCounter
from memevict.simulate.policies import MemevictRunner, clear
from memevict.simulate.replay import ask_schedule
from memevict.simulate.transcript import Action, MemoryTurn, Transcript

BUDGETS = (2000, 5000, 10000)
SIDES = ("read_only", "recall")  # A, B
PLACEMENTS = ("during", "end")


@dataclass(frozen=True, slots=True)
class Side:
    """One side's measures in one replay (see the module's docstring)."""

    asked: tuple[bool, ...]  # per question, in the transcript's order
    plain: tuple[bool, ...]
    recent: int  # turns' reads holding the previous exchange
    exchanges: int  # turns' reads with one
    recent_after: bool | None  # end: the plain window after the questions holds the last two
    reads: int  # context(query=...) reads, the turns' and the questions'
    read_usec: int
    recalls: int  # recall calls
    recall_usec: int


@dataclass(frozen=True, slots=True)
class RecallOnRead:
    """One transcript, budget and placement: each side's measures."""

    source: str
    budget: int
    placement: str  # "during" or "end"
    sides: Mapping[str, Side]

    @property
    def questions(self) -> int:
        return len(self.sides["read_only"].asked)


def during_schedule(transcript: Transcript) -> dict[int, list[int]]:
    """The questions (by index) asked right after each event (by index, -1: before any)
    in the ``during`` placement: one with ``at`` when the transcript asks it; one
    without, after the last turn of the session of its latest evidence turn (of the
    evidence turn itself if it has no session; after the last event if none is said)."""
    events = transcript.events
    timed = ask_schedule(transcript)
    at: dict[str, int] = {}  # turn id -> its latest event
    session_end: dict[str, int] = {}
    for i, event in enumerate(events):
        if isinstance(event, MemoryTurn):
            at[event.id] = i
            if event.session is not None:
                session_end[event.session] = i
    schedule: dict[int, list[int]] = {}
    for after, asked in timed.items():
        for q in asked:
            question = transcript.questions[q]
            if question.at is None:
                said = [at[e] for e in question.evidence if e in at]
                if said:
                    turn = events[max(said)]
                    assert isinstance(turn, MemoryTurn)
                    after = session_end.get(turn.session, max(said)) if turn.session else max(said)
                else:
                    after = len(events) - 1
            schedule.setdefault(after, []).append(q)
    return {after: sorted(asked) for after, asked in sorted(schedule.items())}


@dataclass
class _Reader:
    """A side's store, reading as the side does and counting what it costs."""

    client: redis.Redis
    runner: MemevictRunner
    recalls_read: bool
    reads: int = 0
    read_usec: int = 0
    recalls: int = 0
    recall_usec: int = 0
    recent: int = 0
    exchanges: int = 0
    asked: dict[int, bool] = field(default_factory=dict)
    plain: dict[int, bool] = field(default_factory=dict)

    def _usec(self) -> int:
        return script_usec(command_stats(self.client))

    def read(self, room: int, query: str, now: int) -> set[str]:
        """``context(room, query=query)``; B recalls what the query brought."""
        if room <= 0:
            return set()
        store = self.runner.store
        before = self._usec()
        context = store.context(room, query=query, now=now)
        after = self._usec()
        self.reads += 1
        self.read_usec += after - before
        if self.recalls_read and context.recalled:
            for memory_id in context.recalled:
                store.recall(memory_id, now=now)
            self.recalls += len(context.recalled)
            self.recall_usec += self._usec() - after
        return {memory_id for memory_id, _ in context.items}

    def window(self, budget: int, now: int) -> set[str]:
        """The plain window (a probe: not counted in the cost)."""
        return {memory_id for memory_id, _ in self.runner.store.context(budget, now=now).items}


def recall_on_read(
    client: redis.Redis,
    transcript: Transcript,
    budgets: Sequence[int] = BUDGETS,
    fields: Mapping[str, Any] | None = None,
    *,
    placements: Sequence[str] = PLACEMENTS,
    tokens_of: TokenCounter = approx_tokens,
    prefix: str | None = None,
) -> list[RecallOnRead]:
    """Replays ``transcript`` (labelled) once per budget and placement into two namespaces
    ``<prefix>-<n>`` (``memevict-simulate-<8 random hex digits>`` unless given; cleared
    before and after), A and B in lockstep: one RecallOnRead per budget and placement."""
    unknown = sorted(set(placements) - set(PLACEMENTS))
    if unknown:
        raise ValueError(f"unknown placements {', '.join(unknown)}: choose from {PLACEMENTS}")
    prefix = prefix if prefix is not None else f"memevict-simulate-{secrets.token_hex(4)}"
    out: list[RecallOnRead] = []
    n = 0
    for budget in budgets:
        policy = conversation_policy(budget, **dict(fields or {}))
        for placement in [p for p in PLACEMENTS if p in placements]:
            namespaces = {side: f"{prefix}-{n + i}" for i, side in enumerate(SIDES)}
            n += len(SIDES)
            for namespace in namespaces.values():
                clear(client, namespace)
            try:
                readers = {
                    side: _Reader(
                        client,
                        MemevictRunner(client, namespace, policy, tokens_of),
                        side == "recall",
                    )
                    for side, namespace in namespaces.items()
                }
                sides = _replay(transcript, readers, budget, placement, tokens_of)
            finally:
                for namespace in namespaces.values():
                    clear(client, namespace)
            out.append(RecallOnRead(transcript.source, budget, placement, sides))
    return out


def _replay(
    transcript: Transcript,
    readers: Mapping[str, _Reader],
    budget: int,
    placement: str,
    tokens_of: TokenCounter,
) -> dict[str, Side]:
    questions = transcript.questions
    events = transcript.events
    last = len(events) - 1
    schedule = (
        during_schedule(transcript)
        if placement == "during"
        else {last: list(range(len(questions)))}
    )
    said: dict[str, MemoryTurn] = {}  # the memories said and not forgotten, latest last
    now = events[0].at if events else 0
    order = list(readers.values())

    def ask(asked: Sequence[int], step: int) -> None:
        for q in asked:
            question = questions[q]
            room = budget - tokens_of(question.question)
            for reader in order if step % 2 == 0 else order[::-1]:
                if placement == "during":
                    plain = reader.window(budget, now)
                    reader.plain[q] = any(e in plain for e in question.evidence)
                held = reader.read(room, question.question, now)
                reader.asked[q] = any(e in held for e in question.evidence)

    ask(schedule.get(-1, []), 0)
    for i, event in enumerate(events):
        now = event.at
        if isinstance(event, MemoryTurn):
            if event.role == "user":
                previous = list(said)[-2:]
                room = budget - tokens_of(event.text or "")
                for reader in order if i % 2 == 0 else order[::-1]:
                    held = reader.read(room, event.text or "", now)
                    if len(previous) == 2:
                        reader.exchanges += 1
                        reader.recent += all(p in held for p in previous)
            said.pop(event.id, None)  # (an update: said again, now)
            said[event.id] = event
            for reader in order:
                reader.runner.remember(event)
        else:
            for reader in order:
                reader.runner.act(event)
            if isinstance(event, Action) and event.action == "forget":
                said.pop(event.id, None)
        if i in schedule:
            ask(schedule[i], i)

    out: dict[str, Side] = {}
    latest = list(said)[-2:]
    for side, reader in readers.items():
        recent_after: bool | None = None
        if placement == "end":
            plain = reader.window(budget, now)
            reader.plain = {q: any(e in plain for e in x.evidence) for q, x in enumerate(questions)}
            recent_after = all(p in plain for p in latest)
        out[side] = Side(
            asked=tuple(reader.asked.get(q, False) for q in range(len(questions))),
            plain=tuple(reader.plain.get(q, False) for q in range(len(questions))),
            recent=reader.recent,
            exchanges=reader.exchanges,
            recent_after=recent_after,
            reads=reader.reads,
            read_usec=reader.read_usec,
            recalls=reader.recalls,
            recall_usec=reader.recall_usec,
        )
    return out


# -- the report ----------------------------------------------------------------


def _sum(results: Sequence[RecallOnRead], side: str, key: Callable[[Side], int]) -> int:
    return sum(key(r.sides[side]) for r in results)


def totals(results: Sequence[RecallOnRead]) -> dict[str, Any]:
    """Per placement and budget (over the transcripts): the questions, and per side the
    counts; ``gains`` / ``losses``: the questions B's asked context covers and A's not,
    and the reverse."""
    out: dict[str, Any] = {}
    for placement in PLACEMENTS:
        for budget in dict.fromkeys(r.budget for r in results):
            group = [r for r in results if (r.placement, r.budget) == (placement, budget)]
            if not group:
                continue
            entry: dict[str, Any] = {
                "questions": sum(r.questions for r in group),
                "transcripts": len(group),
            }
            for side in SIDES:
                entry[side] = {
                    "asked": _sum(group, side, lambda s: sum(s.asked)),
                    "plain": _sum(group, side, lambda s: sum(s.plain)),
                    "recent": _sum(group, side, lambda s: s.recent),
                    "exchanges": _sum(group, side, lambda s: s.exchanges),
                    "recent_after": (
                        _sum(group, side, lambda s: int(bool(s.recent_after)))
                        if placement == "end"
                        else None
                    ),
                    "reads": _sum(group, side, lambda s: s.reads),
                    "read_usec": _sum(group, side, lambda s: s.read_usec),
                    "recalls": _sum(group, side, lambda s: s.recalls),
                    "recall_usec": _sum(group, side, lambda s: s.recall_usec),
                }
            pairs = [
                (a, b)
                for r in group
                for a, b in zip(r.sides["read_only"].asked, r.sides["recall"].asked, strict=True)
            ]
            entry["gains"] = sum(b and not a for a, b in pairs)
            entry["losses"] = sum(a and not b for a, b in pairs)
            out.setdefault(placement, {})[str(budget)] = entry
    return out


def recall_on_read_json(results: Sequence[RecallOnRead]) -> dict[str, Any]:
    """The totals (:func:`totals`), and each transcript's counts."""
    each = [
        {
            "source": r.source,
            "budget": r.budget,
            "placement": r.placement,
            "questions": r.questions,
            **{
                side: {
                    "asked": sum(s.asked),
                    "plain": sum(s.plain),
                    "recent": s.recent,
                    "exchanges": s.exchanges,
                    "recent_after": s.recent_after,
                    "reads": s.reads,
                    "read_usec": s.read_usec,
                    "recalls": s.recalls,
                    "recall_usec": s.recall_usec,
                }
                for side, s in r.sides.items()
            },
        }
        for r in results
    ]
    return {"totals": totals(results), "transcripts": each}


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


Counts = dict[str, Any]  # one placement and budget's totals (see totals)
Measure = Callable[[Counts, Counts], tuple[int, int]]  # (totals, a side's) -> part, whole


def _shares(title: str, by_budget: Mapping[str, Counts], measure: Measure) -> list[str]:
    """A row: per budget, A's and B's share, and B - A in points."""
    cells = [title]
    for entry in by_budget.values():
        parts = [measure(entry, entry[side]) for side in SIDES]
        shares = [100 * p / w if w else 0.0 for p, w in parts]
        cells += [_pct(*parts[0]), _pct(*parts[1]), f"{shares[1] - shares[0]:+.1f}"]
    return cells


def _usec(title: str, by_budget: Mapping[str, Counts], key: str) -> list[str]:
    """A row: per budget, A's and B's server µs a read, and B - A."""
    cells = [title]
    for entry in by_budget.values():
        a, b = (s[key] / s["reads"] if s["reads"] else 0.0 for s in (entry[x] for x in SIDES))
        cells += [f"{a:.0f}", f"{b:.0f}", f"{b - a:+.0f}"]
    return cells


def recall_on_read_table(results: Sequence[RecallOnRead]) -> str:
    """Per placement, the measures by budget: A, B and B - A (points, or µs)."""
    found = totals(results)
    sources = len(dict.fromkeys(r.source for r in results))
    lines = [
        "Recall on read: A, context(query=...) read-only (the store's behaviour); B, what "
        f"each read's query brought recalled (hot and fresh again) after it. {sources} "
        "transcript(s); memevict's store alone, a namespace of the adapters' policy per budget"
    ]
    for placement, by_budget in found.items():
        first = next(iter(by_budget.values()))
        where = (
            "during the conversation (after its evidence's session, or when the transcript asks it)"
            if placement == "during"
            else "at the end (all after the last turn, in order)"
        )
        lines += ["", f"{first['questions']} questions asked {where}:"]
        rows = [["", *(f"{b} tokens" if k == 0 else "" for b in by_budget for k in range(3))]]
        rows.append(["", *(h for _ in by_budget for h in ("A", "B", "B-A"))])
        plain = "just before the question" if placement == "during" else "after the questions"
        rows += [
            _shares(
                "the question as the query", by_budget, lambda e, s: (s["asked"], e["questions"])
            ),
            _shares(
                f"the plain window {plain}", by_budget, lambda e, s: (s["plain"], e["questions"])
            ),
            _shares(
                "a turn's context: the previous exchange",
                by_budget,
                lambda e, s: (s["recent"], s["exchanges"]),
            ),
        ]
        if placement == "end":
            rows.append(
                _shares(
                    "the plain window after: the last exchange",
                    by_budget,
                    lambda e, s: (s["recent_after"], e["transcripts"]),
                )
            )
        gains = [f"{e['gains']} / {e['losses']}" for e in by_budget.values()]
        rows.append(["B covers, A not / A, B not", *(c for g in gains for c in ("", g, ""))])
        rows.append(_usec("server µs a read: the context", by_budget, "read_usec"))
        rows.append(_usec("server µs a read: the recalls", by_budget, "recall_usec"))
        calls = [e["recall"]["recalls"] / max(1, e["recall"]["reads"]) for e in by_budget.values()]
        rows.append(["recall calls a read", *(c for n in calls for c in ("0", f"{n:.2f}", ""))])
        lines += _aligned(rows)
    lines += [
        "",
        "server µs: INFO commandstats' script entries read around each read and its recalls "
        "(exact only when nothing else runs on the server)",
    ]
    return "\n".join(lines)


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
