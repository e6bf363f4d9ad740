"""memevict.simulate.recent: questions about what was just said, derived from the
generated sessions of seeds 0 to 9 (each checked against the transcript, worked out
again here), the last turns before each user turn, the cases a question cannot be
asked, and a replay on a real server: FIFO holds everything recent, the added
questions change no policy's window."""

from __future__ import annotations

import json

import pytest
import redis

from memevict import Policy
from memevict.importance import rules
from memevict.simulate import label_transcript, simulate
from memevict.simulate.recent import (
    LAST_TURNS,
    RECENT,
    last_turn_checks,
    recent_questions,
    with_questions,
)
from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import MemoryTurn, Transcript, parse_lines

SEEDS = range(10)


@pytest.fixture(scope="module")
def transcripts() -> dict[int, Transcript]:
    return {seed: generate_sessions(seed) for seed in SEEDS}


def positions(t: Transcript) -> dict[str, tuple[str | None, int]]:
    """Each turn's session and its place in it (0, 1, ...)."""
    found: dict[str, tuple[str | None, int]] = {}
    count: dict[str | None, int] = {}
    for e in t.events:
        if isinstance(e, MemoryTurn):
            found[e.id] = (e.session, count.get(e.session, 0))
            count[e.session] = count.get(e.session, 0) + 1
    return found


def turn_at(t: Transcript) -> dict[int, MemoryTurn]:
    return {e.at: e for e in t.events if isinstance(e, MemoryTurn)}


def test_each_recent_question_is_about_a_statement_two_to_eight_turns_before_it(
    transcripts: dict[int, Transcript],
) -> None:
    for seed, t in transcripts.items():
        where, asked_at = positions(t), turn_at(t)
        said = {e.id: e for e in t.events if isinstance(e, MemoryTurn)}
        found = recent_questions(t, seed)
        assert len(found) > 50, (seed, len(found))
        for q in found:
            assert q.category == RECENT and len(q.evidence) == 1 and q.at is not None, q
            statement, asking = said[q.evidence[0]], asked_at[q.at]
            assert asking.role == "user" and statement.at < q.at, q
            (session, place), (asking_session, asking_place) = where[statement.id], where[asking.id]
            assert session == asking_session and 2 <= asking_place - place <= 8, (q, asking.id)
            # the text is that of a question of the transcript about the statement
            assert any(q.question == o.question and statement.id in o.evidence for o in t.questions)


def test_every_statement_with_a_user_turn_two_to_eight_turns_later_gets_one(
    transcripts: dict[int, Transcript],
) -> None:
    for seed, t in transcripts.items():
        where = positions(t)
        by_place = {v: k for k, v in where.items()}
        said = {e.id: e for e in t.events if isinstance(e, MemoryTurn)}
        evidence = {e for q in t.questions for e in q.evidence}
        expected = {
            m
            for m in evidence
            if any(
                (later := by_place.get((where[m][0], where[m][1] + k))) is not None
                and said[later].role == "user"
                for k in range(2, 9)
            )
        }
        found = [q.evidence[0] for q in recent_questions(t, seed)]
        assert len(found) == len(set(found)) and set(found) == expected, seed
        # the user's statements get one; recaps at a session's end mostly not
        statements = {m for m in evidence if said[m].role == "user"}
        assert len(expected & statements) >= 0.9 * len(statements), seed


def test_the_same_seed_gives_the_same_questions_and_another_seed_other_times(
    transcripts: dict[int, Transcript],
) -> None:
    t = transcripts[3]
    one = recent_questions(t, 1)
    assert one == recent_questions(t, 1) == recent_questions(generate_sessions(3), 1)
    other = recent_questions(t, 2)
    assert [q.evidence for q in one] == [q.evidence for q in other]  # the same statements
    assert [q.at for q in one] != [q.at for q in other]  # asked at other turns


def test_the_range_of_turns_is_a_parameter(transcripts: dict[int, Transcript]) -> None:
    t = transcripts[0]
    where, asked_at = positions(t), turn_at(t)
    found = recent_questions(t, 0, nearest=1, farthest=1)
    assert found
    for q in found:
        assert q.at is not None
        assert where[asked_at[q.at].id][1] - where[q.evidence[0]][1] == 1
    for nearest, farthest in ((0, 3), (3, 2)):
        with pytest.raises(ValueError, match="nearest"):
            recent_questions(t, 0, nearest=nearest, farthest=farthest)


def test_the_last_turns_before_each_user_turn(transcripts: dict[int, Transcript]) -> None:
    for t in transcripts.values():
        where, asked_at = positions(t), turn_at(t)
        users = [
            e
            for e in t.events
            if isinstance(e, MemoryTurn) and e.role == "user" and where[e.id][1] >= 4
        ]
        found = last_turn_checks(t)
        assert [q.at for q in found] == [u.at for u in users]
        for q in found:
            assert q.category == LAST_TURNS and q.at is not None
            session, place = where[asked_at[q.at].id]
            assert [where[m] for m in q.evidence] == [(session, place - k) for k in (4, 3, 2, 1)]
    assert all(len(q.evidence) == 2 for q in last_turn_checks(transcripts[0], 2))
    with pytest.raises(ValueError, match="last"):
        last_turn_checks(transcripts[0], 0)


def _log(lines: list[dict[str, object]]) -> Transcript:
    return parse_lines([json.dumps(x) for x in lines], "log")


def test_no_question_at_a_turn_whose_time_a_later_event_shares() -> None:
    def turn(i: int, at: int, role: str, session: str = "1") -> dict[str, object]:
        return {"id": f"t{i}", "at": at, "role": role, "session": session, "text": f"line {i}"}

    lines = [turn(0, 0, "user"), turn(1, 10, "assistant"), turn(2, 20, "user")]
    lines += [turn(3, 30, "assistant"), turn(4, 40, "user"), turn(5, 40, "assistant")]
    lines += [turn(6, 50, "user"), turn(7, 60, "user", "2"), turn(8, 70, "user", "2")]
    lines.append({"question": "What was t0?", "evidence": ["t0"]})
    lines.append({"question": "What was t7?", "evidence": ["t7"]})
    t = _log(lines)
    # t0: t2 and t6 are asked after; t4 shares its time with t5 (the question would come
    # after t5); t7's session has no turn two later
    (q,) = recent_questions(t, 1)
    assert q.evidence == ("t0",) and q.at in (20, 50) and q.question == "What was t0?"
    assert {q.at for s in range(20) for q in recent_questions(t, s)} == {20, 50}
    assert [(q.at, q.evidence) for q in last_turn_checks(t)] == [(50, ("t2", "t3", "t4", "t5"))]


def test_the_text_is_that_of_the_question_naming_the_fewest_turns() -> None:
    lines: list[dict[str, object]] = [
        {"id": f"t{i}", "role": "user", "text": f"line {i}"} for i in range(5)
    ]
    lines.append({"question": "Both?", "evidence": ["t0", "t1"]})
    lines.append({"question": "First?", "evidence": ["t0"]})
    lines.append({"question": "Again first?", "evidence": ["t0"]})
    t = _log(lines)
    assert [(q.question, q.evidence) for q in recent_questions(t)] == [
        ("First?", ("t0",)),
        ("Both?", ("t1",)),
    ]


def test_a_replay_fifo_holds_what_was_just_said_and_the_windows_do_not_change(
    client: redis.Redis,
) -> None:
    t = label_transcript(generate_sessions(2, 4), rules)
    extra = (*recent_questions(t, 2), *last_turn_checks(t))
    checked = with_questions(t, extra)
    assert checked.questions[: len(t.questions)] == t.questions
    assert checked.questions[len(t.questions) :] == extra
    policy = {"memevict": Policy(max_hot=10, half_life_memories=1e9)}
    before = simulate(client, t, 10, policy, policies=("fifo", "memevict")).outcomes
    after = simulate(client, checked, 10, policy, policies=("fifo", "memevict")).outcomes
    for key in ("fifo", "memevict"):
        assert after[key].window == before[key].window
        assert after[key].answers[: len(t.questions)] == before[key].answers
    own = len(t.questions)
    # FIFO's window of 10 holds the last 10 turns: every statement 2-8 turns back
    assert all(a.answerable_at_ask for a in after["fifo"].answers[own:])
    assert all(a.fully_at_ask for a in after["fifo"].answers[own:])
    # without decay, memevict's window of 10 keeps the most important turns said:
    # some chatter just said is not among them
    lasts = [
        a
        for q, a in zip(checked.questions, after["memevict"].answers, strict=True)
        if q.category == LAST_TURNS
    ]
    assert lasts and not all(a.fully_at_ask for a in lasts)
