"""The multi-session conversation generator: each promise of its docstring,
for seeds 1 to 5 at the default 20 sessions, and the JSONL the CLI reads."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator

import pytest

from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import START_MS, MemoryTurn, Transcript, parse_lines

SEEDS = (1, 2, 3, 4, 5)
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
# How the user says a fact changed: every update template uses one of these.
UPDATE = re.compile(
    r"\b(moved?|pushed|changed|cancelled|cut|swapped|extension|up to|instead|new routine)\b"
)
STOP = {"when", "what", "which", "where", "does", "with", "that", "this", "from", "have"}


@pytest.fixture(scope="module")
def transcripts() -> dict[int, Transcript]:
    return {seed: generate_sessions(seed) for seed in SEEDS}


def turns(t: Transcript) -> list[MemoryTurn]:
    return [e for e in t.events if isinstance(e, MemoryTurn)]


def sessions(t: Transcript) -> Iterator[list[MemoryTurn]]:
    current: list[MemoryTurn] = []
    for turn in turns(t):
        if current and turn.session != current[-1].session:
            yield current
            current = []
        current.append(turn)
    yield current


def evidence(t: Transcript) -> set[str]:
    return {e for q in t.questions for e in q.evidence}


def session_of(turn_id: str) -> int:
    return int(turn_id.split(":")[0][1:])


def specific(text: str) -> bool:
    """A digit, or a capitalised word that does not start a sentence ("I" aside)."""
    if re.search(r"\d", text):
        return True
    words = re.finditer(r"\b[A-Z][a-z]+\b", text)
    return any(m.start() > 0 and not re.search(r"[.!?:]\s*$", text[: m.start()]) for m in words)


# -- reproducibility and arguments ------------------------------------------


def test_the_same_seed_gives_the_same_transcript_and_other_seeds_another() -> None:
    assert generate_sessions(7, 6) == generate_sessions(7, 6)
    assert generate_sessions(7) == generate_sessions(7)
    assert generate_sessions(7).events != generate_sessions(8).events
    assert generate_sessions(7).questions != generate_sessions(8).questions


@pytest.mark.parametrize("bad", [1, 0, -3, True])
def test_fewer_than_two_sessions_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="sessions"):
        generate_sessions(1, bad)


def test_two_sessions_are_enough() -> None:
    t = generate_sessions(3, 2)
    assert [s[0].session for s in sessions(t)] == ["1", "2"]
    assert t.questions


# -- turns ------------------------------------------------------------------


def test_sessions_of_ten_to_forty_turns_with_ids_counted_from_one(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        found = list(sessions(t))
        assert [s[0].session for s in found] == [str(n) for n in range(1, 21)]
        for number, session in enumerate(found, start=1):
            assert 10 <= len(session) <= 40, (number, len(session))
            ids = [f"S{number}:T{i}" for i in range(1, len(session) + 1)]
            assert [x.id for x in session] == ids
        assert len({x.id for x in turns(t)}) == t.turns


def test_every_turn_is_unlabelled_with_a_role_a_speaker_and_a_session(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        assert t.turns == len(t.events) and t.actions == 0
        assert t.unlabelled == t.turns and not t.critical
        users = {x.speaker for x in turns(t) if x.role == "user"}
        assert len(users) == 1 and next(iter(users)) not in (None, "assistant", "user")
        for x in turns(t):
            assert x.importance is None and x.category is None
            assert not x.critical and not x.whitelist
            assert x.role in ("user", "assistant") and x.text
            assert x.speaker == ("assistant" if x.role == "assistant" else next(iter(users)))
            assert x.session == str(session_of(x.id))


def test_the_user_opens_each_session_and_the_assistant_has_the_last_word(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        for session in sessions(t):
            assert session[0].role == "user" and session[-1].role == "assistant"
        pairs = list(itertools.pairwise(turns(t)))
        assert not [(a.id, b.id) for a, b in pairs if a.role == b.role == "assistant"]
        twice = sum(a.role == b.role == "user" for a, b in pairs)
        assert 1 <= twice <= 0.1 * t.turns


# -- time -------------------------------------------------------------------


def test_turns_are_seconds_apart_and_sessions_minutes_to_weeks(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        assert turns(t)[0].at == START_MS
        found = list(sessions(t))
        for session in found:
            steps = [b.at - a.at for a, b in itertools.pairwise(session)]
            assert all(15_000 <= s <= 120_000 for s in steps), steps
        gaps = [b[0].at - a[-1].at for a, b in itertools.pairwise(found)]
        assert all(10 * MINUTE <= g <= 30 * DAY for g in gaps), gaps
        assert min(gaps) < 8 * HOUR and max(gaps) >= 14 * DAY
        times = [x.at for x in turns(t)]
        assert times == sorted(times)


def test_a_short_and_a_long_gap_from_four_sessions_on() -> None:
    for seed in range(1, 21):
        t = generate_sessions(seed, 4)
        found = list(sessions(t))
        gaps = [b[0].at - a[-1].at for a, b in itertools.pairwise(found)]
        assert min(gaps) < 8 * HOUR and max(gaps) >= 14 * DAY, (seed, gaps)


# -- questions and evidence -------------------------------------------------


def test_turn_counts_and_the_share_of_evidence_are_in_range(
    transcripts: dict[int, Transcript],
) -> None:
    for seed, t in transcripts.items():
        share = len(evidence(t)) / t.turns
        per_turn = len(t.questions) / t.turns
        assert 300 <= t.turns <= 600, (seed, t.turns)
        assert 0.20 <= share <= 0.35, (seed, share)
        assert 0.3 <= per_turn <= 0.5, (seed, per_turn)


def test_evidence_names_memory_turns_said_before_the_question(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        said = {x.id: x.at for x in turns(t)}
        assert len({q.question for q in t.questions}) == len(t.questions)
        for q in t.questions:
            assert q.question.endswith("?") and q.evidence
            assert len(set(q.evidence)) == len(q.evidence)
            for e in q.evidence:
                assert e in said
                assert q.at is None or said[e] < q.at, (q, said[e])


def test_a_quarter_of_the_questions_come_a_session_after_their_evidence(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        user_turns = {x.at: x for x in turns(t) if x.role == "user"}
        during = [q for q in t.questions if q.at is not None]
        assert 0.15 <= len(during) / len(t.questions) <= 0.35
        for q in during:
            assert q.at in user_turns  # asked at the time of a user turn
            asked = user_turns[q.at]
            assert all(session_of(e) < session_of(asked.id) for e in q.evidence), (q, asked)


def test_one_to_three_questions_a_fact(transcripts: dict[int, Transcript]) -> None:
    for t in transcripts.values():
        alone = Counter(q.evidence[0] for q in t.questions if len(q.evidence) == 1)
        assert max(alone.values()) <= 3
        named = Counter(e for q in t.questions for e in q.evidence)
        assert sum(n >= 2 for n in named.values()) >= 10


def test_a_changed_fact_is_asked_about_with_its_update_not_the_stale_statement(
    transcripts: dict[int, Transcript],
) -> None:
    for seed, t in transcripts.items():
        by_id = {x.id: x for x in turns(t)}
        updates = {
            e
            for e in evidence(t)
            if by_id[e].role == "user" and UPDATE.search(by_id[e].text or "") and session_of(e) > 1
        }
        assert len(updates) >= 3, seed
        stale = 0
        for q in t.questions:
            for e in set(q.evidence) & updates:
                update = by_id[e]
                # the statement it changes: an earlier session's user turn on the same topic
                topic = _words(q.question) & _words(update.text or "")
                earlier = [
                    x
                    for x in turns(t)
                    if x.role == "user"
                    and session_of(x.id) < session_of(e)
                    and topic
                    and topic <= _words(x.text or "")
                ]
                if earlier and not set(q.evidence) & {x.id for x in earlier}:
                    stale += 1
        assert stale >= 1, seed


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4} - STOP


def test_some_questions_combine_two_facts_and_recaps_are_evidence(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        roles = {x.id: x.role for x in turns(t)}
        two = [q for q in t.questions if len({session_of(e) for e in q.evidence}) == 2]
        assert len(two) >= 3
        said_by_assistant = {e for e in evidence(t) if roles[e] == "assistant"}
        assert said_by_assistant and len(said_by_assistant) < 0.2 * len(evidence(t))
        for e in said_by_assistant:
            recap = next(x for x in turns(t) if x.id == e)
            assert "recap" in (recap.text or "")


def test_filler_includes_distractors_with_names_and_numbers(
    transcripts: dict[int, Transcript],
) -> None:
    for t in transcripts.values():
        filler = [x for x in turns(t) if x.id not in evidence(t)]
        assert len(filler) >= 0.6 * t.turns
        distractors = [x for x in filler if specific(x.text or "")]
        assert len(distractors) >= 0.1 * len(filler), len(distractors)
        assert any(x.role == "user" for x in distractors)
        assert any(x.role == "assistant" for x in distractors)


def test_the_distractor_check_tells_names_and_numbers_from_sentence_starts() -> None:
    assert specific("haha I watched 3 episodes of The Office")
    assert specific("lunch with Ines today")
    assert not specific("That's awesome! Thanks, that helps")
    assert not specific("I think I need a vacation. Maybe soon")


# -- the format the CLI reads -----------------------------------------------


def test_the_transcript_round_trips_through_jsonl(transcripts: dict[int, Transcript]) -> None:
    for t in transcripts.values():
        lines = [
            json.dumps(
                {
                    "id": x.id,
                    "at": x.at,
                    "text": x.text,
                    "role": x.role,
                    "speaker": x.speaker,
                    "session": x.session,
                }
            )
            for x in turns(t)
        ]
        for q in t.questions:
            line: dict[str, object] = {"question": q.question, "evidence": list(q.evidence)}
            if q.at is not None:
                line["at"] = q.at
            lines.append(json.dumps(line))
        back = parse_lines(lines, "x")
        assert back == Transcript(t.events, "x", t.questions)
