"""Checks of what was just said, derived from a transcript: the counterweight to
a long recency half-life, which end-of-conversation questions cannot show.

- ``recent_questions``: for each turn the transcript's questions name as
  evidence (a fact statement, an update, a recap), one question asked at a
  user turn ``nearest`` to ``farthest`` turns later in the same session (2 to 8
  by default), chosen by the seed; its evidence is that turn alone, its
  category ``"recent"``. Its text is that of a question of the transcript
  naming the turn (the one naming the fewest turns, the earliest of those):
  the same thing asked again, a few turns after it was said. A turn with no
  user turn in that range of its session (a recap at a session's end, most
  often) gets none. The text is a label for reports: the replay measures
  only whether the window holds the evidence when the question is asked.
- ``last_turn_checks``: at each user turn with at least ``last`` turns
  before it in its session, a check whose evidence is those ``last`` turns,
  category ``"last turns"``: the window holds them all (``fully_at_ask``), or
  some (``kept_at_ask``), right after the user turn is remembered.

Both are Questions with an ``at``: add them to the transcript's
(``with_questions``) and replay it; they are no events, so the policies'
windows are the same as without them. Only memory turns count as turns; a
question is asked only at a user turn whose time no later event shares
(the replay asks a question after the last event at or before its time), and
only about turns said strictly before that time.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence

from memevict.simulate.transcript import MemoryTurn, Question, Transcript

RECENT = "recent"
LAST_TURNS = "last turns"
NEAREST = 2  # turns between a statement and the question about it, at least
FARTHEST = 8  # and at most
LAST = 4  # turns before a user turn that last_turn_checks asks for


def recent_questions(
    transcript: Transcript, seed: int = 1, *, nearest: int = NEAREST, farthest: int = FARTHEST
) -> tuple[Question, ...]:
    """One question (category "recent") about each evidence turn of the
    transcript's questions that has an askable user turn ``nearest`` to
    ``farthest`` turns after it in its session, asked at one of those chosen
    by ``seed``; in the order of their evidence turns. The same transcript and
    seed give the same questions."""
    if not 1 <= nearest <= farthest:
        raise ValueError(f"need 1 <= nearest <= farthest, got {nearest} and {farthest}")
    texts = _texts(transcript.questions)
    last_at = _last_at(transcript)
    rng = random.Random(f"memevict recent {seed}")
    found: list[Question] = []
    for turns in _sessions(transcript):
        for i, turn in enumerate(turns):
            if turn.id not in texts:
                continue
            later = turns[i + nearest : i + farthest + 1]
            askable = [t for t in later if _askable(t, last_at) and t.at > turn.at]
            if askable:
                asked = rng.choice(askable)
                found.append(Question(texts[turn.id], (turn.id,), asked.at, RECENT))
    return tuple(found)


def last_turn_checks(transcript: Transcript, last: int = LAST) -> tuple[Question, ...]:
    """At each askable user turn with at least ``last`` turns before it in
    its session, a check (category "last turns") whose evidence is those
    turns, oldest first."""
    if last < 1:
        raise ValueError(f"last must be at least 1, got {last}")
    last_at = _last_at(transcript)
    found: list[Question] = []
    for turns in _sessions(transcript):
        for i, turn in enumerate(turns):
            before = turns[max(0, i - last) : i]
            if i >= last and _askable(turn, last_at) and all(t.at < turn.at for t in before):
                text = f"the {last} turns before {turn.id}"
                found.append(Question(text, tuple(t.id for t in before), turn.at, LAST_TURNS))
    return tuple(found)


def with_questions(transcript: Transcript, questions: Iterable[Question]) -> Transcript:
    """The transcript with ``questions`` after its own."""
    return dataclasses.replace(transcript, questions=(*transcript.questions, *questions))


def _texts(questions: Sequence[Question]) -> dict[str, str]:
    """For each evidence turn, the text of the question naming it with the
    fewest evidence turns (the earliest such question)."""
    best: dict[str, Question] = {}
    for question in questions:
        for memory_id in question.evidence:
            known = best.get(memory_id)
            if known is None or len(question.evidence) < len(known.evidence):
                best[memory_id] = question
    return {memory_id: q.question for memory_id, q in best.items()}


def _sessions(transcript: Transcript) -> list[list[MemoryTurn]]:
    """The memory turns of each session, in the order said (a transcript
    without sessions is one session); turns whose id is said more than once
    are left out: which saying a question means would be unclear."""
    turns = [e for e in transcript.events if isinstance(e, MemoryTurn)]
    said: dict[str, int] = {}
    for turn in turns:
        said[turn.id] = said.get(turn.id, 0) + 1
    sessions: dict[str | None, list[MemoryTurn]] = {}
    for turn in turns:
        if said[turn.id] == 1:
            sessions.setdefault(turn.session, []).append(turn)
    return list(sessions.values())


def _last_at(transcript: Transcript) -> dict[int, str]:
    """Each time of the transcript's events, and the id of the last event at
    it if that event is a memory turn ("" if an action)."""
    return {e.at: e.id if isinstance(e, MemoryTurn) else "" for e in transcript.events}


def _askable(turn: MemoryTurn, last_at: dict[int, str]) -> bool:
    """A user turn after which a question at its time is asked: no later
    event has the same time."""
    return turn.role == "user" and last_at.get(turn.at) == turn.id
