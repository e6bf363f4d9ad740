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
  actions that follow it (the measurements themselves are not counted);
- the questions: the share of the transcript's questions whose evidence the
  window holds at least one turn of (answerable) and all turns of (fully),
  when each question is asked and at the end. A question with ``at`` is
  asked right after the last event at or before that time; one without, or
  after the last event, at the end. A forgotten memory never counts.

``hindsight`` is no policy but the ceiling: at each moment questions are
asked, the best window of the same size among the memories said so far,
chosen knowing those questions (policies.hindsight_windows), and at the end
the same for every question.
"""

from __future__ import annotations

import bisect
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

import redis

from memevict.policy import Policy
from memevict.results import Eviction
from memevict.simulate.policies import (
    FifoRunner,
    LruRunner,
    MemevictRunner,
    Runner,
    clear,
    hindsight_windows,
)
from memevict.simulate.transcript import BadTranscript, MemoryTurn, Question, Transcript

SAMPLES = 200  # retention points per policy, at most
POLICIES = ("fifo", "lru", "memevict", "hindsight")  # memevict: every policy given
TIMELINE_LOG = 100_000  # the log_max of a replay that keeps a timeline


@dataclass(frozen=True, slots=True)
class Left:
    """One memory leaving a tier in a replay (the timeline): after memory turn ``turn``
    (the event of index ``event``), why, and its score and importance as it left."""

    turn: int
    event: int
    id: str
    reason: str
    from_tier: str
    to_tier: str
    score: float
    importance: float


@dataclass(frozen=True, slots=True)
class Answer:
    """One question, and the evidence the window held when it was asked and
    at the end. For hindsight, the kept ids are those of its window for
    "answerable"; ``fully_*`` come from its window for "all evidence"."""

    question: str
    evidence: tuple[str, ...]
    at: int | None  # when it is asked, as the transcript says (None: at the end)
    kept_at_ask: tuple[str, ...]
    kept_at_end: tuple[str, ...]
    answerable_at_ask: bool
    fully_at_ask: bool
    answerable_at_end: bool
    fully_at_end: bool


@dataclass(frozen=True, slots=True)
class Answers:
    """How many of the transcript's questions the window could answer."""

    questions: int
    answerable_at_ask: float | None  # None when the transcript asks nothing
    fully_at_ask: float | None
    answerable_at_end: float | None
    fully_at_end: float | None
    answers: tuple[Answer, ...]


class _AnswerFields(TypedDict):
    questions: int
    answerable_at_ask: float | None
    fully_at_ask: float | None
    answerable_at_end: float | None
    fully_at_end: float | None
    answers: tuple[Answer, ...]


@dataclass(frozen=True, slots=True)
class Outcome(Answers):
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
    timeline: tuple[Left, ...] = ()  # memevict's, when asked (simulate(timeline=True))


@dataclass(frozen=True, slots=True)
class Simulation:
    transcript: Transcript
    window: int
    outcomes: dict[str, Outcome]  # by policy: fifo, lru, memevict...
    hindsight: Answers | None = None  # when the transcript has questions and it was asked for
    policies: dict[str, Policy] = field(default_factory=dict)  # memevict's, by report key


def simulate(
    client: redis.Redis,
    transcript: Transcript,
    window: int,
    memevict: Mapping[str, Policy],
    *,
    policies: Collection[str] = POLICIES,
    prefix: str | None = None,
    advance: Callable[[int], None] = lambda n: None,
    timeline: bool = False,
) -> Simulation:
    """Replays the transcript through FIFO, LRU and every memevict policy
    (by report key, each with max_hot == window) among ``policies``, one
    after the other, each in its namespace ``<prefix>-<n>`` on the same
    server, and works out hindsight when the transcript has questions.

    The prefix is ``memevict-simulate-<8 random hex digits>`` unless given,
    so that simulations sharing a server never meet; each namespace is
    cleared before and after. ``advance(n)`` is told of every n events done.
    ``timeline``: each memevict outcome also holds what left its tiers, turn by turn,
    read from the namespace's eviction log (its policy run with log_max on; the log
    changes no ranking). Raises BadTranscript when a memory turn has no importance yet.
    """
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise ValueError(
            f"unknown policies {', '.join(unknown)}: choose from {', '.join(POLICIES)}"
        )
    if transcript.unlabelled:
        raise BadTranscript(
            f"{transcript.source}: {transcript.unlabelled} memory turns have no importance "
            "or category: label them first (memevict.simulate.label_transcript)"
        )
    prefix = prefix if prefix is not None else f"memevict-simulate-{secrets.token_hex(4)}"
    makers: dict[str, Callable[[str], Runner]] = {}
    if "fifo" in policies:
        makers["fifo"] = lambda ns: FifoRunner(client, ns, window)
    if "lru" in policies:
        makers["lru"] = lambda ns: LruRunner(client, ns, window)
    chosen = dict(memevict) if "memevict" in policies else {}
    for key, policy in chosen.items():
        if policy.max_hot != window:
            raise ValueError(f"{key}: max_hot {policy.max_hot} is not the window {window}")
        if timeline:
            policy = replace(policy, log_max=TIMELINE_LOG)
        makers[key] = lambda ns, policy=policy: MemevictRunner(client, ns, policy)  # type: ignore[misc]
    outcomes: dict[str, Outcome] = {}
    for n, (key, make) in enumerate(makers.items()):
        namespace = f"{prefix}-{n}"
        clear(client, namespace)
        try:
            runner = make(namespace)
            left = runner.left if timeline and isinstance(runner, MemevictRunner) else None
            outcomes[key] = replay(transcript, runner, advance=advance, left=left)
        finally:
            clear(client, namespace)
    best = hindsight(transcript, window) if "hindsight" in policies else None
    return Simulation(transcript, window, outcomes, best, chosen)


def ask_schedule(transcript: Transcript) -> dict[int, list[int]]:
    """The questions (by index) asked right after each event (by index): a
    question with ``at`` after the last event at or before it (-1: before
    any), one without, or after the last event, after the last event."""
    times = [event.at for event in transcript.events]
    last = len(times) - 1
    schedule: dict[int, list[int]] = {}
    for q, question in enumerate(transcript.questions):
        after = (
            last if question.at is None else min(bisect.bisect_right(times, question.at) - 1, last)
        )
        schedule.setdefault(after, []).append(q)
    return schedule


def replay(
    transcript: Transcript,
    runner: Runner,
    *,
    sample_every: int | None = None,
    advance: Callable[[int], None] = lambda n: None,
    left: Callable[[], list[Eviction]] | None = None,
) -> Outcome:
    """Replays every event of the transcript through one runner; with ``left`` (what
    left the runner's tiers since it was last asked), the timeline of it, by event."""
    total_turns = transcript.turns
    every = sample_every or max(1, -(-total_turns // SAMPLES))
    schedule = ask_schedule(transcript)
    questions = transcript.questions
    kept_at_ask: dict[int, tuple[str, ...]] = {q: () for q in schedule.get(-1, [])}
    importance: dict[str, float] = {}  # of the memories said and not forgotten
    critical: set[str] = set()
    whitelisted: set[str] = set()
    evicted_unreferenced: set[str] = set()
    retention: list[tuple[int, float]] = []
    timeline: list[Left] = []
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

    for i, event in enumerate(transcript.events):
        if isinstance(event, MemoryTurn) and turns and turns % every == 0:
            sample()  # after turn number `turns` and the actions that followed it
        now = event.at
        if isinstance(event, MemoryTurn):
            assert event.importance is not None  # simulate() refuses unlabelled transcripts
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
        if left is not None:
            timeline += [
                Left(turns, i, e.id, e.reason, e.from_tier, e.to_tier, e.score, e.importance)
                for e in left()
            ]
        if i in schedule:
            held = set(runner.window(now)).intersection(importance)
            for q in schedule[i]:
                kept_at_ask[q] = _kept(questions[q], held)
        advance(1)
    if not retention or retention[-1][0] != turns:
        sample()

    window = tuple(runner.window(now))
    held = set(window).intersection(importance)
    known = [importance[m] for m in window if m in held]
    kept_at_end = [_kept(question, held) for question in questions]
    kept = tuple(sorted(critical.intersection(window)))
    asked = [kept_at_ask[q] for q in range(len(questions))]
    return Outcome(
        **_answers(questions, asked, asked, kept_at_end, kept_at_end),
        turns=turns,
        actions=actions,
        critical_total=len(critical),
        critical_kept=kept,
        critical_retained=len(kept) / len(critical) if critical else None,
        retention=tuple(retention),
        mean_importance=sum(known) / len(known) if known else 0.0,
        whitelisted_total=len(whitelisted),
        whitelisted_kept=len(whitelisted.intersection(window)),
        evictions=evictions,
        wrongful_evictions=wrongful,
        recalls_needed=recalls,
        ms_per_turn=spent * 1000 / turns,
        window=window,
        timeline=tuple(timeline),
    )


def hindsight(transcript: Transcript, window: int) -> Answers | None:
    """The ceiling: at each moment questions are asked, the best windows of
    ``window`` memories among those said so far (and not forgotten) for the
    questions asked then; at the end, for every question. None when the
    transcript asks nothing. No server: it is worked out from the transcript."""
    questions = transcript.questions
    if not questions:
        return None
    schedule = ask_schedule(transcript)
    said: dict[str, None] = {}  # memories said and not forgotten, in the order first said
    found: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # q: (kept, fully kept)

    def ask(asked: Sequence[int]) -> dict[int, tuple[tuple[str, ...], tuple[str, ...]]]:
        evidence = [questions[q].evidence for q in asked]
        candidates = hindsight_windows(list(said), evidence, window)
        # Either window is one a policy could have held: each metric takes the better.
        answering = max(candidates, key=lambda w: sum(bool(w.intersection(e)) for e in evidence))
        full = max(reversed(candidates), key=lambda w: sum(w.issuperset(e) for e in evidence))
        return {q: (_kept(questions[q], answering), _kept(questions[q], full)) for q in asked}

    found.update(ask(schedule.get(-1, [])))
    for i, event in enumerate(transcript.events):
        if isinstance(event, MemoryTurn):
            said.setdefault(event.id)
        elif event.action == "forget":
            said.pop(event.id, None)
        if i in schedule:
            found.update(ask(schedule[i]))
    at_end = ask(range(len(questions)))
    order = range(len(questions))
    return Answers(
        **_answers(
            questions,
            [found[q][0] for q in order],
            [found[q][1] for q in order],
            [at_end[q][0] for q in order],
            [at_end[q][1] for q in order],
        )
    )


def _kept(question: Question, held: Collection[str]) -> tuple[str, ...]:
    return tuple(m for m in question.evidence if m in held)


def _answers(
    questions: Sequence[Question],
    answering_at_ask: Sequence[tuple[str, ...]],
    full_at_ask: Sequence[tuple[str, ...]],
    answering_at_end: Sequence[tuple[str, ...]],
    full_at_end: Sequence[tuple[str, ...]],
) -> _AnswerFields:
    """The question fields of Answers, from the evidence each question's
    window held when asked and at the end (one window for "answerable",
    one for "all evidence")."""
    answers = tuple(
        Answer(
            question=q.question,
            evidence=q.evidence,
            at=q.at,
            kept_at_ask=answering_at_ask[i],
            kept_at_end=answering_at_end[i],
            answerable_at_ask=bool(answering_at_ask[i]),
            fully_at_ask=len(full_at_ask[i]) == len(q.evidence),
            answerable_at_end=bool(answering_at_end[i]),
            fully_at_end=len(full_at_end[i]) == len(q.evidence),
        )
        for i, q in enumerate(questions)
    )

    def share(flags: Sequence[bool]) -> float | None:
        return sum(flags) / len(flags) if flags else None

    return {
        "questions": len(questions),
        "answerable_at_ask": share([a.answerable_at_ask for a in answers]),
        "fully_at_ask": share([a.fully_at_ask for a in answers]),
        "answerable_at_end": share([a.answerable_at_end for a in answers]),
        "fully_at_end": share([a.fully_at_end for a in answers]),
        "answers": answers,
    }
