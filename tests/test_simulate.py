"""memevict simulate: the generated workload, the JSONL reader, FIFO and LRU
worked out by hand, labelling, questions and hindsight worked out by hand, the
qualitative result, several transcripts, concurrent runs, and the command line."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from memevict import Policy
from memevict.cli import main
from memevict.errors import BadImportance
from memevict.importance import Message, rules
from memevict.scripts import key_name
from memevict.simulate import (
    BadTranscript,
    Question,
    alabel_transcript,
    generate,
    hindsight,
    label_transcript,
    memevict_policies,
    read_jsonl,
    simulate,
)
from memevict.simulate import plot as simulate_plot
from memevict.simulate.policies import (
    FifoRunner,
    LruRunner,
    MemevictRunner,
    hindsight_windows,
)
from memevict.simulate.replay import replay
from memevict.simulate.transcript import Action, MemoryTurn, Transcript, parse_lines
from tests import docs, simulate_labelers
from tests.servers import Server

# The reference table (docs/rules.md) and the generator's documented proportions.
IMPORTANCE = {
    "instruction": 10,
    "tool_error": 8,
    "business": 7,
    "conclusion": 5,
    "context": 3,
    "chitchat": 1,
}
SHARES = {
    "chitchat": 0.30,
    "context": 0.30,
    "conclusion": 0.15,
    "business": 0.12,
    "tool_error": 0.08,
    "instruction": 0.05,
}
T0 = 1_700_000_000_000


def memory_turns(t: Transcript) -> list[MemoryTurn]:
    return [e for e in t.events if isinstance(e, MemoryTurn)]


def actions(t: Transcript, kind: str) -> list[Action]:
    return [e for e in t.events if isinstance(e, Action) and e.action == kind]


def cli(server: Server, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--url", server.url, "simulate", *args])
    return result.exit_code, result.output


# -- the generator ---------------------------------------------------------


def test_the_generator_is_reproducible_for_a_seed() -> None:
    assert generate(7, 300) == generate(7, 300)
    assert generate(7, 300).events != generate(8, 300).events
    assert len(memory_turns(generate(7, 300))) == 300


def test_generated_categories_follow_the_proportions_and_the_reference_table() -> None:
    for seed in (1, 2, 3):
        turns = memory_turns(generate(seed, 10_000))
        counts = Counter(t.category for t in turns)
        for category, share in SHARES.items():
            assert abs(counts[category] / len(turns) - share) < 0.02, (seed, category, counts)
        for t in turns:
            assert t.category is not None and t.importance == IMPORTANCE[t.category]


def test_tool_errors_come_in_bursts_of_three_to_five() -> None:
    for seed in (1, 2, 3):
        runs: list[int] = []
        length = 0
        for t in memory_turns(generate(seed, 2000)):
            if t.category == "tool_error":
                length += 1
            elif length:
                runs.append(length)
                length = 0
        assert len(runs) > 20
        assert all(3 <= n <= 5 for n in runs), Counter(runs)


def test_critical_facts_are_in_the_middle_one_per_forty_turns() -> None:
    for seed in (1, 2, 3):
        turns = memory_turns(generate(seed, 400))
        critical = [i for i, t in enumerate(turns) if t.critical]
        assert len(critical) == 400 // 40
        assert all(160 <= i < 240 for i in critical), critical
        kinds = Counter(turns[i].category for i in critical)
        assert set(kinds) == {"instruction", "tool_error", "business"}, kinds
        # said once: no other turn restates a critical fact
        ids = Counter(t.id for t in turns)
        assert all(ids[turns[i].id] == 1 for i in critical)


def test_later_references_touch_earlier_memories() -> None:
    t = generate(1, 400)
    turns = memory_turns(t)
    said_at = {turn.id: turn.at for turn in reversed(turns)}  # first time said
    touches = actions(t, "touch")
    assert len(touches) > 10
    for touch in touches:
        assert touch.at > said_at[touch.id]
    touched = {a.id for a in touches}
    critical = {turn.id for turn in turns if turn.critical}
    assert touched & critical and touched - critical
    # some business facts are restated: a later turn with the same id
    restated = [i for i, n in Counter(x.id for x in turns).items() if n > 1]
    assert restated and all(i.startswith("business-") for i in restated)


def test_tasks_are_whitelisted_then_demoted_when_they_end() -> None:
    t = generate(1, 400)
    whitelisted: set[str] = set()
    demoted = []
    for event in t.events:
        if isinstance(event, MemoryTurn) and event.whitelist:
            whitelisted.add(event.id)
        elif isinstance(event, Action) and event.action == "demote":
            assert event.id in whitelisted and event.id.startswith("task-")
            whitelisted.discard(event.id)
            demoted.append(event.id)
        assert len(whitelisted) <= 2  # the user's profile and the current task
    assert len(demoted) >= 2
    assert "user-profile" in whitelisted  # never demoted


def test_time_advances_every_turn_and_actions_follow_their_turn() -> None:
    t = generate(3, 200, turn_ms=10_000)
    last: MemoryTurn | None = None
    for event in t.events:
        if isinstance(event, MemoryTurn):
            if last is not None:
                assert 5_000 <= event.at - last.at <= 15_000
            last = event
        else:
            assert last is not None and event.at == last.at


# -- the JSONL reader ------------------------------------------------------

GOOD = [
    {"id": "pw", "category": "instruction", "text": "the key is 42", "critical": True, "at": T0},
    {"id": "hi", "importance": 1.5},
    {"action": "touch", "id": "pw"},
    {"id": "task", "importance": 7, "whitelist": True, "at": T0 + 60_000},
    {"action": "demote", "id": "task", "at": T0 + 61_000},
    {"action": "whitelist", "id": "hi"},
    {"action": "forget", "id": "hi"},
    {"id": "hi", "category": "chitchat"},
]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_valid_transcript_is_read_with_its_times(tmp_path: Path) -> None:
    lines = [json.dumps(x) for x in GOOD]
    lines.insert(2, "   ")  # blank lines are skipped
    t = read_jsonl(write_lines(tmp_path / "log.jsonl", lines), turn_ms=30_000)
    assert t.events == (
        MemoryTurn("pw", 10.0, T0, text="the key is 42", critical=True, category="instruction"),
        MemoryTurn("hi", 1.5, T0 + 30_000),  # no "at": one turn_ms after the line before
        Action("touch", "pw", T0 + 30_000),  # no "at": the time of the line before
        MemoryTurn("task", 7.0, T0 + 60_000, whitelist=True),
        Action("demote", "task", T0 + 61_000),
        Action("whitelist", "hi", T0 + 61_000),
        Action("forget", "hi", T0 + 61_000),
        MemoryTurn("hi", 1.0, T0 + 91_000, category="chitchat"),
    )
    assert (t.turns, t.actions, t.critical) == (4, 4, frozenset({"pw"}))


BAD_LINES = [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('"pw"', "expected a JSON object"),
    ('{"importance": 1}', '"id"'),
    ('{"id": "", "importance": 1}', '"id"'),
    ('{"id": 7, "importance": 1}', '"id"'),
    ('{"id": "' + "x" * 1025 + '", "importance": 1}', '"id"'),
    ('{"id": "\\ud800", "importance": 1}', "not valid Unicode"),
    ('{"id": "a", "importance": 1, "category": "context"}', "at most one of"),
    ('{"id": "a", "category": "gossip"}', '"category" must be one of'),
    ('{"id": "a", "category": null}', '"category" must be one of'),
    ('{"id": "a", "importance": 0}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": -3}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": NaN}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": 1e400}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": "5"}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": true}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": 1, "text": 5}', '"text" must be a string'),
    ('{"id": "a", "importance": 1, "whitelist": "yes"}', '"whitelist" must be true or false'),
    ('{"id": "a", "importance": 1, "critical": 1}', '"critical" must be true or false'),
    ('{"id": "a", "importance": 1, "at": -1}', '"at" must be whole ms'),
    ('{"id": "a", "importance": 1, "at": 1.5}', '"at" must be whole ms'),
    ('{"id": "a", "importance": 1, "at": 1}', "before the previous line"),
    ('{"id": "a", "importance": 1, "importnce": 2}', "unknown field(s) 'importnce'"),
    ('{"action": "recall", "id": "pw"}', '"action" must be one of'),
    ('{"action": "touch", "id": "nobody"}', "which no earlier line remembers"),
    ('{"action": "touch", "id": "gone"}', "which no earlier line remembers"),
    ('{"action": "touch", "id": "pw", "importance": 3}', "unknown field(s) 'importance'"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_each_malformed_line_is_rejected_with_its_number(
    tmp_path: Path, line: str, message: str
) -> None:
    before = [
        json.dumps({"id": "pw", "importance": 10, "at": T0}),
        json.dumps({"id": "gone", "importance": 3}),
        json.dumps({"action": "forget", "id": "gone"}),
    ]
    after = [json.dumps({"action": "touch", "id": "pw"})]
    path = write_lines(tmp_path / "bad.jsonl", [*before, line, *after])
    with pytest.raises(BadTranscript) as raised:
        read_jsonl(path)
    assert f"line {len(before) + 1}:" in str(raised.value)
    assert message in str(raised.value)


def test_a_file_without_memory_turns_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(BadTranscript, match="no memory turns"):
        read_jsonl(write_lines(tmp_path / "empty.jsonl", ["", "  "]))


def test_questions_roles_speakers_sessions_and_unlabelled_turns_are_read(tmp_path: Path) -> None:
    lines = [
        {"id": "plan", "text": "we fly on May 3", "role": "user", "speaker": "Ada", "session": 1},
        {"question": "When do we fly?", "evidence": ["plan", "seat", "plan"], "at": T0 + 5},
        {"id": "seat", "importance": 4, "role": "assistant", "session": "s-2", "at": T0 + 10},
        {"question": "Which seat?", "evidence": ["seat"]},
        {"id": "out", "text": "503", "role": "tool", "kind": "function_call_output",
         "tool_status": "error", "at": T0 + 20},
    ]  # fmt: skip
    t = read_jsonl(write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in lines]))
    assert t.events == (
        MemoryTurn("plan", None, T0, text="we fly on May 3", role="user", speaker="Ada",
                   session="1"),
        MemoryTurn("seat", 4.0, T0 + 10, role="assistant", session="s-2"),
        MemoryTurn("out", None, T0 + 20, text="503", role="tool", kind="function_call_output",
                   tool_status="error"),
    )  # fmt: skip
    # a question is no event; evidence named twice counts once; evidence may come later
    assert t.questions == (
        Question("When do we fly?", ("plan", "seat"), T0 + 5),
        Question("Which seat?", ("seat",), None),
    )
    assert (t.turns, t.actions, t.unlabelled) == (3, 0, 2)
    # the labeler sees the kind and the status: the failed tool's result is a tool error
    labelled = label_transcript(t, rules)
    assert [e.importance for e in labelled.events if e.id == "out"] == [8.0]


BAD_QUESTIONS = [
    ('{"question": "", "evidence": ["pw"]}', '"question" must be a non-empty string'),
    ('{"question": 7, "evidence": ["pw"]}', '"question" must be a non-empty string'),
    ('{"question": "why?"}', '"evidence" must be a non-empty list'),
    ('{"question": "why?", "evidence": []}', '"evidence" must be a non-empty list'),
    ('{"question": "why?", "evidence": "pw"}', '"evidence" must be a non-empty list'),
    ('{"question": "why?", "evidence": ["pw", 3]}', '"evidence" must be a non-empty list'),
    ('{"question": "why?", "evidence": ["pw"], "at": -5}', '"at" must be whole ms'),
    ('{"question": "why?", "evidence": ["pw"], "id": "q"}', "unknown field(s) 'id'"),
    ('{"question": "why?", "evidence": ["nobody"]}', "evidence 'nobody' is not the id of any"),
    ('{"id": "a", "importance": 1, "role": 3}', '"role" must be a string'),
    ('{"id": "a", "importance": 1, "speaker": ["Ada"]}', '"speaker" must be a string'),
    ('{"id": "a", "importance": 1, "session": true}', '"session" must be a string'),
    ('{"id": "a", "importance": 1, "kind": 1}', '"kind" must be a string'),
    ('{"id": "a", "importance": 1, "tool_status": false}', '"tool_status" must be a string'),
]


@pytest.mark.parametrize(("line", "message"), BAD_QUESTIONS)
def test_each_malformed_question_or_name_is_rejected_with_its_number(
    line: str, message: str
) -> None:
    before = [json.dumps({"id": "pw", "importance": 10, "at": T0}), ""]
    after = [json.dumps({"id": "later", "importance": 1})]
    with pytest.raises(BadTranscript) as raised:
        parse_lines([*before, line, *after], "log")
    assert str(raised.value).startswith("log line 3: ") and message in str(raised.value)


def test_evidence_of_a_forgotten_memory_is_still_a_memory_turn() -> None:
    lines = [
        {"id": "pw", "importance": 10},
        {"action": "forget", "id": "pw"},
        {"question": "the password?", "evidence": ["pw"]},
    ]
    t = parse_lines([json.dumps(x) for x in lines], "log")
    assert t.questions == (Question("the password?", ("pw",)),)


def test_nothing_runs_on_a_bad_file(server: Server, client: redis.Redis, tmp_path: Path) -> None:
    good = [json.dumps({"id": f"m{i}", "importance": 1 + i % 10}) for i in range(200)]
    path = write_lines(tmp_path / "log.jsonl", [*good, '{"id": "late", "importance": "high"}'])
    client.config_resetstat()
    code, out = cli(server, "--transcript", str(path), "--window", "10")
    assert code != 0
    assert out.strip().count("\n") == 0 and "line 201:" in out and "Traceback" not in out
    sent = client.info("commandstats")
    assert not {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_zadd"} & set(sent), sent


# -- FIFO, LRU and memevict on a transcript worked out by hand --------------


def hand_transcript() -> Transcript:
    def turn(memory_id: str, importance: float, s: int, **flags: bool) -> MemoryTurn:
        return MemoryTurn(memory_id, importance, T0 + s * 1000, **flags)

    def act(kind: str, memory_id: str, s: int) -> Action:
        return Action(kind, memory_id, T0 + s * 1000)  # type: ignore[arg-type]

    return Transcript(
        (
            turn("a", 10, 1),
            turn("b", 1, 2, critical=True),
            turn("c", 5, 3, whitelist=True),
            turn("d", 3, 4),
            act("touch", "b", 4),
            act("demote", "c", 4),
            act("whitelist", "c", 4),
            turn("e", 1, 5),
            turn("c", 5, 6),  # c again
            act("touch", "a", 6),
            turn("f", 1, 7),
        ),
        "by hand",
    )


def steps(runner: FifoRunner | LruRunner | MemevictRunner) -> list[tuple[str, ...]]:
    """What each event of the hand transcript evicted."""
    evicted = []
    for event in hand_transcript().events:
        if isinstance(event, MemoryTurn):
            evicted.append(runner.remember(event))
        else:
            evicted.append(runner.act(event))
    return evicted


def test_fifo_evicts_the_oldest_inserted(client: redis.Redis) -> None:
    # Window 3. a b c; d pushes out a; touch, demote, whitelist change nothing;
    # e pushes out b; c again is still in the window, so it keeps its place
    # and f pushes it out (had it been re-inserted, d would go).
    found = steps(FifoRunner(client, "fifo", 3))
    assert found == [(), (), (), ("a",), (), (), (), ("b",), (), (), ("c",)]
    assert sorted(FifoRunner(client, "fifo", 3).window(T0)) == ["d", "e", "f"]


def test_lru_evicts_the_least_recently_remembered_or_touched(client: redis.Redis) -> None:
    # Window 3. a b c; d pushes out a; touch b makes c the least recent; e
    # pushes out c; c again comes back and pushes out d; touch a (gone) brings
    # nothing back; f pushes out b, touched before e and c.
    found = steps(LruRunner(client, "lru", 3))
    assert found == [(), (), (), ("a",), (), (), (), ("c",), ("d",), (), ("b",)]
    assert sorted(LruRunner(client, "lru", 3).window(T0)) == ["c", "e", "f"]


def test_memevict_evicts_the_lowest_score(client: redis.Redis) -> None:
    # Window 3, no protection, a half-life of years: scores are importances.
    # a10 b1 c5 (whitelisted); d3 pushes out b (1); e1 and f1 are the lowest
    # when they come, and go themselves.
    policy = Policy(max_hot=3, protect_s=0, half_life_s=1e9)
    runner = MemevictRunner(client, "mv", policy)
    assert steps(runner) == [(), (), (), ("b",), (), (), (), ("e",), (), (), ("f",)]
    assert sorted(runner.window(T0 + 7000)) == ["a", "c", "d"]


def test_replay_counts_the_same_way_for_every_policy(client: redis.Redis) -> None:
    t = hand_transcript()
    fifo = replay(t, FifoRunner(client, "fifo", 3), sample_every=1)
    # FIFO evicted a (touched later, when it was gone: wrongful, and a
    # recall), b (the critical fact, whose touch came before it went: not
    # wrongful) and c (at the last turn).
    assert (fifo.evictions, fifo.wrongful_evictions, fifo.recalls_needed) == (3, 1, 1)
    assert (fifo.critical_retained, fifo.critical_kept) == (0.0, ())
    assert (fifo.whitelisted_kept, fifo.whitelisted_total) == (0, 1)
    assert fifo.mean_importance == (3 + 1 + 1) / 3
    # after turns 2, 3, 4 (and its actions), 5, 6 (and its touch) and 7:
    # b is there until e pushes it out
    assert fifo.retention == ((2, 1.0), (3, 1.0), (4, 1.0), (5, 0.0), (6, 0.0), (7, 0.0))
    assert (fifo.turns, fifo.actions) == (7, 4)

    lru = replay(t, LruRunner(client, "lru", 3), sample_every=1)
    # LRU evicted a (touched later), c (remembered again later), d and b
    # (never referenced again); b stayed until the last turn thanks to its touch.
    assert (lru.evictions, lru.wrongful_evictions, lru.recalls_needed) == (4, 2, 1)
    assert lru.critical_retained == 0.0 and lru.retention[-2:] == ((6, 1.0), (7, 0.0))
    assert (lru.whitelisted_kept, lru.mean_importance) == (1, (5 + 1 + 1) / 3)

    mv = replay(t, MemevictRunner(client, "mv", Policy(max_hot=3, protect_s=0, half_life_s=1e9)))
    # memevict evicted b (touched later), e and f (never referenced again).
    assert (mv.evictions, mv.wrongful_evictions, mv.recalls_needed) == (3, 1, 1)
    assert mv.critical_retained == 0.0 and mv.whitelisted_kept == 1
    assert mv.mean_importance == (10 + 5 + 3) / 3


# -- labelling ----------------------------------------------------------------


def unlabelled_transcript() -> Transcript:
    return Transcript(
        (
            MemoryTurn("key", None, T0, text="deploy key sk-1", role="system"),
            MemoryTurn("fact", 5.0, T0 + 1, text="ACME renews in May", role="system"),
            MemoryTurn("hi", None, T0 + 2, text="hi!", role="user"),
            Action("touch", "key", T0 + 2),
            MemoryTurn("bare", None, T0 + 3),
        ),
        "unlabelled",
    )


def test_a_labeler_gives_the_unlabelled_turns_their_importance() -> None:
    simulate_labelers.seen.clear()
    t = label_transcript(unlabelled_transcript(), simulate_labelers.by_role)
    # system 10, anything else 1; the labelled turn keeps its 5; actions unchanged
    assert [(e.id, e.importance) for e in memory_turns(t)] == [
        ("key", 10.0), ("fact", 5.0), ("hi", 1.0), ("bare", 1.0)
    ]  # fmt: skip
    assert t.unlabelled == 0 and t.events[3] == Action("touch", "key", T0 + 2)
    assert simulate_labelers.seen == [
        Message("deploy key sk-1", role="system"),
        Message("hi!", role="user"),
        Message("", role=None),  # a turn without text
    ]
    # an async labeler gives the same, awaited or run to completion
    assert label_transcript(unlabelled_transcript(), simulate_labelers.by_role_async) == t
    assert asyncio.run(alabel_transcript(unlabelled_transcript(), simulate_labelers.by_role)) == t


def test_the_rules_label_each_turn_by_its_text_and_role() -> None:
    t = label_transcript(unlabelled_transcript(), rules)
    for before, after in zip(memory_turns(unlabelled_transcript()), memory_turns(t), strict=True):
        expected = before.importance or rules(Message(before.text or "", role=before.role))
        assert after.importance == expected


def test_a_labeler_answering_a_bad_importance_fails_loudly() -> None:
    with pytest.raises(BadImportance):
        label_transcript(unlabelled_transcript(), simulate_labelers.broken)


def test_an_unlabelled_transcript_is_refused_by_the_replay(client: redis.Redis) -> None:
    with pytest.raises(BadTranscript, match="3 memory turns have no importance"):
        simulate(client, unlabelled_transcript(), 2, memevict_policies(2, {}, []))
    assert client.dbsize() == 0


# -- questions and hindsight worked out by hand ----------------------------------


def question_transcript() -> Transcript:
    def turn(memory_id: str, s: int) -> MemoryTurn:
        return MemoryTurn(memory_id, 1.0, T0 + s * 1000)

    return Transcript(
        (
            turn("a", 1),
            turn("b", 2),
            turn("c", 3),
            turn("d", 4),
            turn("e", 5),
            Action("forget", "e", T0 + 5000),
            turn("f", 6),
        ),
        "questions by hand",
        (
            Question("q1", ("a",), T0 + 2000),  # asked after b (same time), before c
            Question("q2", ("a", "b"), T0 + 2500),  # after b
            Question("q3", ("b", "c"), T0 + 3000),  # after c
            Question("q4", ("d", "e"), T0 + 5000),  # after the forget of e
            Question("q5", ("f",)),  # at the end
            Question("q6", ("a",), T0),  # before anything is said
        ),
    )


def test_fifo_answers_questions_when_asked_and_at_the_end(client: redis.Redis) -> None:
    # Window 2: {a,b} after b, {b,c} after c, {d} after e is forgotten, {d,f} at the end.
    o = replay(question_transcript(), FifoRunner(client, "fifo", 2))
    assert [(a.question, a.kept_at_ask, a.kept_at_end) for a in o.answers] == [
        ("q1", ("a",), ()),
        ("q2", ("a", "b"), ()),
        ("q3", ("b", "c"), ()),
        ("q4", ("d",), ("d",)),
        ("q5", ("f",), ("f",)),
        ("q6", (), ()),
    ]
    assert [(a.fully_at_ask, a.fully_at_end) for a in o.answers] == [
        (True, False), (True, False), (True, False), (False, False), (True, True), (False, False)
    ]  # fmt: skip
    assert o.questions == 6
    assert (o.answerable_at_ask, o.fully_at_ask) == (5 / 6, 4 / 6)
    assert (o.answerable_at_end, o.fully_at_end) == (2 / 6, 1 / 6)
    assert o.answers[0].at == T0 + 2000 and o.answers[4].at is None
    # no questions: no fractions
    plain = replay(hand_transcript(), FifoRunner(client, "plain", 3))
    assert plain.questions == 0 and plain.answers == ()
    assert plain.answerable_at_ask is plain.fully_at_end is None


def test_a_forgotten_memory_never_answers(client: redis.Redis) -> None:
    class Lagging(FifoRunner):
        """FIFO whose window still lists what the transcript forgot."""

        def act(self, action: Action) -> tuple[str, ...]:
            return ()

    # Window 2: after the forget of e the window still lists d and e; then f
    # pushes d out, leaving e (forgotten) and f.
    o = replay(question_transcript(), Lagging(client, "lagging", 2))
    assert o.window == ("e", "f")
    assert [(a.kept_at_ask, a.kept_at_end) for a in o.answers][3:5] == [
        (("d",), ()),
        (("f",), ("f",)),
    ]


def test_hindsight_picks_the_best_window_knowing_the_questions() -> None:
    found = hindsight(question_transcript(), 2)
    assert found is not None
    # When asked, each group alone: {a} then {a,b} after b; {b}, {b,c} after c;
    # {d} after the forget (e is gone: q4 cannot be fully answered); {f} at the end.
    assert [(a.kept_at_ask, a.answerable_at_ask, a.fully_at_ask) for a in found.answers] == [
        (("a",), True, True),
        (("a",), True, True),
        (("b",), True, True),
        (("d",), True, False),
        (("f",), True, True),
        ((), False, False),
    ]
    # At the end, one window of 2 for all six among a b c d f: a answers q1 q2
    # q6, then b (q3, the earliest of the ties) -> 4; all evidence: q1, q6 (a),
    # q2 (b), then q3 needs c and does not fit -> 3.
    assert [a.kept_at_end for a in found.answers] == [
        ("a",), ("a", "b"), ("b",), (), (), ("a",)
    ]  # fmt: skip
    assert (found.answerable_at_ask, found.fully_at_ask) == (5 / 6, 4 / 6)
    assert (found.answerable_at_end, found.fully_at_end) == (4 / 6, 3 / 6)
    assert hindsight(hand_transcript(), 2) is None  # no questions


def test_hindsight_greedy_windows_by_hand() -> None:
    # Answerable: the memory answering most open questions, ties to the earliest said.
    assert hindsight_windows(["a", "b"], [["b"], ["a"]], 1)[0] == {"a"}
    assert hindsight_windows(["a", "b"], [["a"], ["b"], ["b"]], 1)[0] == {"b"}
    # Not said (yet, or forgotten): never chosen; a question with such evidence
    # cannot be fully answered.
    assert hindsight_windows(["a"], [["z"], ["a", "z"]], 2) == ({"a"}, frozenset())
    # All evidence: the question needing the fewest new memories, while it fits:
    # q3 {c}, then q2 {a,b}; q4 needs e as well, 4 > 3.
    evidence = [["a", "b", "c", "d"], ["a", "b"], ["c"], ["b", "e"]]
    covering, full = hindsight_windows(["a", "b", "c", "d", "e"], evidence, 3)
    assert full == {"a", "b", "c"}
    assert covering == {"b", "c"}  # b answers q1 q2 q4, then c q3: all four with two


def test_hindsight_is_the_best_when_each_question_has_one_evidence_turn(
    client: redis.Redis,
) -> None:
    # Window 1 at the end, for three questions on a, b, b: only {b} answers two.
    t = Transcript(
        tuple(MemoryTurn(m, 1.0, T0 + i) for i, m in enumerate("abc")),
        "single evidence",
        (Question("x", ("a",)), Question("y", ("b",)), Question("z", ("b",))),
    )
    best = hindsight(t, 1)
    assert best is not None and (best.answerable_at_end, best.fully_at_end) == (2 / 3, 2 / 3)
    fifo = replay(t, FifoRunner(client, "fifo", 1))
    assert fifo.answerable_at_end == 0  # FIFO keeps c


# -- the qualitative result -------------------------------------------------


def test_memevict_keeps_the_critical_facts_fifo_and_lru_lose(client: redis.Redis) -> None:
    """On the generated workload, default policy, small size."""
    window = 20
    kept: dict[str, list[float]] = {"fifo": [], "lru": [], "memevict": []}
    importance: dict[str, list[float]] = {"fifo": [], "lru": [], "memevict": []}
    for seed in (1, 2, 3):
        t = generate(seed, 120)
        result = simulate(client, t, window, memevict_policies(window, {}, []))
        for key, outcome in result.outcomes.items():
            assert outcome.critical_retained is not None
            kept[key].append(outcome.critical_retained)
            importance[key].append(outcome.mean_importance)
        assert client.dbsize() == 0  # every namespace cleared afterwards

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    for peer in ("fifo", "lru"):
        assert all(m >= p for m, p in zip(kept["memevict"], kept[peer], strict=True))
        assert mean(kept["memevict"]) >= mean(kept[peer]) + 0.4, kept
        assert mean(importance["memevict"]) >= mean(importance[peer]) + 2, importance


def test_a_grid_runs_memevict_once_per_combination(server: Server, client: redis.Redis) -> None:
    policies = memevict_policies(
        10, {"whitelist_cap": 5}, ["half_life_s=600,3600", "protect_s=0,30"]
    )
    assert policies == {
        f"memevict half_life_s={h} protect_s={p}": Policy(
            max_hot=10, whitelist_cap=5, half_life_s=h, protect_s=p
        )
        for h in (600, 3600)
        for p in (0, 30)
    }
    args = ["--turns", "40", "--window", "10", "--json", "--clock", "wall"]
    args += ["--grid", "half_life_s=60,3600"]
    code, out = cli(server, *args, "--grid", "evict_batch=0,2")
    assert code == 0, out
    found = json.loads(out)["policies"]
    assert set(found) == {
        "fifo",
        "lru",
        "memevict half_life_s=60 evict_batch=0",
        "memevict half_life_s=60 evict_batch=2",
        "memevict half_life_s=3600 evict_batch=0",
        "memevict half_life_s=3600 evict_batch=2",
    }
    # the values reach the store: with a half-life of 6 turns recency outweighs
    # importance, so the final window holds less important memories
    short, long = (found[f"memevict half_life_s={h} evict_batch=0"] for h in (60, 3600))
    assert short["mean_importance"] < long["mean_importance"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "max_hot=5,10"], "use --window"),
        (["--grid", "nope=1"], "FIELD must be one of"),
        (["--grid", "half_life_s=60,x"], "values must be numbers"),
        (["--grid", "evict_batch=1.5"], "values must be whole numbers"),
        (["--grid", "protect_s=0,0"], "listed twice"),
        (["--grid", "protect_s=0", "--grid", "protect_s=1"], "more than once"),
        (["--half-life-s", "60", "--grid", "half_life_s=60,600"], "both an option and"),
        (["--grid", "half_life_s=0"], "half_life_s must be"),
        (["--half-life-s", "-1"], "half_life_s must be"),
    ],
)
def test_bad_grids_and_policies_exit_with_one_line(
    server: Server, client: redis.Redis, args: list[str], message: str
) -> None:
    code, out = cli(server, "--turns", "20", *args)
    assert code != 0 and message in out and "Traceback" not in out, out
    assert client.dbsize() == 0


# -- the command line ------------------------------------------------------


def test_json_output_has_every_policy_and_field(server: Server, client: redis.Redis) -> None:
    code, out = cli(server, "--turns", "60", "--window", "10", "--half-life-s", "900", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["window"] == 10 and data["transcript"]["turns"] == 60
    assert set(data["policies"]) == {"fifo", "lru", "memevict"}
    for outcome in data["policies"].values():
        assert 0 <= outcome["critical_retained"] <= 1
        assert isinstance(outcome["wrongful_evictions"], int) and outcome["wrongful_evictions"] >= 0
        assert 1 <= outcome["mean_importance"] <= 10
        assert outcome["turns"] == 60
        assert len(outcome["window"]) == 10
        assert outcome["retention"] and all(0 <= f <= 1 for _, f in outcome["retention"])
    assert client.dbsize() == 0


def test_a_users_log_through_the_cli(server: Server, client: redis.Redis, tmp_path: Path) -> None:
    # Window 2: FIFO loses the critical key to two chit-chat turns; memevict keeps it.
    lines = [
        {"id": "key", "category": "instruction", "critical": True, "at": T0},
        {"id": "hi", "category": "chitchat", "at": T0 + 60_000},
        {"id": "thanks", "category": "chitchat", "at": T0 + 120_000},
        {"action": "touch", "id": "key", "at": T0 + 180_000},
    ]
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in lines])
    code, out = cli(
        server, "--transcript", str(path), "--window", "2", "--protect-s", "0", "--json"
    )
    assert code == 0, out
    found = json.loads(out)["policies"]
    assert found["fifo"]["critical_retained"] == 0 and found["fifo"]["wrongful_evictions"] == 1
    assert found["memevict"]["critical_retained"] == 1 and found["memevict"]["recalls_needed"] == 0
    assert json.loads(out)["transcript"]["source"] == str(path)
    code, out = cli(server, "--transcript", str(path), "--seed", "3")
    assert code != 0 and "--seed is for the generated transcript" in out


def test_the_table_names_every_policy_and_the_plot_is_drawn(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    png = tmp_path / "retention.png"
    code, out = cli(server, "--turns", "60", "--window", "10", "--plot", str(png))
    assert code == 0, out
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"policy", "fifo", "lru", "memevict"} <= rows
    assert "Critical facts kept, by turn:" in out
    assert "replaying" not in out  # no progress bar when not on a terminal
    assert png.read_bytes().startswith(b"\x89PNG")


def test_the_timeline_is_what_left_memevict_turn_by_turn(
    server: Server, client: redis.Redis
) -> None:
    """simulate(timeline=True): every memory memevict's calls evicted, after the turn
    whose call evicted it (the replay's own count of evictions, from the replies), each
    with a reason of rule 15; the other policies keep none."""
    transcript = generate(3, 120)
    policies = memevict_policies(10, {"cold_max": 20}, [])
    result = simulate(client, transcript, 10, policies, timeline=True)
    memevict, fifo = result.outcomes["memevict"], result.outcomes["fifo"]
    assert fifo.timeline == ()
    to_cold = [x for x in memevict.timeline if x.to_tier == "cold"]
    assert len(to_cold) == memevict.evictions > 0
    assert all(x.reason in ("max_hot", "evict_batch") for x in to_cold)
    dropped = [x for x in memevict.timeline if x.to_tier == "deleted"]
    assert dropped and all(x.reason in ("cold_max", "forget") for x in dropped)
    turns = [x.turn for x in memevict.timeline]
    assert turns == sorted(turns) and turns[0] > 0 and turns[-1] <= memevict.turns
    # each memory left the hot tier after it was said, at the event that said so
    said = {}
    for i, event in enumerate(transcript.events):
        if isinstance(event, MemoryTurn):
            said.setdefault(event.id, i)
    assert all(said[x.id] <= x.event for x in memevict.timeline)
    # the policy reported is the one asked for (the log changes no ranking)
    assert result.policies["memevict"].log_max == 0
    without = simulate(client, transcript, 10, policies).outcomes["memevict"]
    assert (without.timeline, without.window) == ((), memevict.window)


def test_the_timeline_is_printed_for_one_transcript(server: Server, client: redis.Redis) -> None:
    code, out = cli(server, "--turns", "40", "--window", "10", "--timeline")
    assert code == 0, out
    assert "What left memevict's tiers, turn by turn" in out
    assert out.rstrip().splitlines()[-1].split(" in all: ")[1].startswith("max_hot ")
    code, out = cli(server, "--seeds", "2", "--turns", "20", "--timeline")
    assert code == 2 and "--timeline follows memevict through one transcript" in out
    code, out = cli(server, "--turns", "40", "--window", "10", "--timeline", "--json")
    assert code == 0 and json.loads(out)["policies"]["memevict"]["timeline"]


def test_the_plot_is_skipped_without_matplotlib(
    server: Server, client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simulate_plot, "matplotlib_missing", lambda: True)
    png = tmp_path / "retention.png"
    code, out = cli(server, "--turns", "20", "--window", "10", "--plot", str(png))
    assert code == 0 and "skipping the plot" in out and not png.exists()


def _on_a_terminal(server: Server, *args: str) -> str:
    """Runs the CLI with stderr on a pseudo-terminal; returns what it wrote there."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "memevict", "--url", server.url, "simulate", *args],
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)
    written = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        written += chunk
    os.close(controller)
    assert process.wait() == 0
    return written.decode(errors="replace")


def test_a_progress_bar_on_a_terminal_unless_json(server: Server, client: redis.Redis) -> None:
    assert "replaying" in _on_a_terminal(server, "--turns", "700", "--window", "10")
    assert "replaying" not in _on_a_terminal(server, "--turns", "700", "--window", "10", "--json")


def test_one_progress_bar_over_several_transcripts(server: Server, client: redis.Redis) -> None:
    # 2 x 400 turns and their actions through 3 policies: one bar that ends full.
    written = _on_a_terminal(server, "--seeds", "2", "--turns", "400", "--window", "10")
    assert "replaying" in written and "100%" in written


def test_the_readme_log_replays_as_written(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    block = docs.blocks("jsonl")[0][1]
    path = write_lines(tmp_path / "my-agent.jsonl", block.splitlines())
    t = read_jsonl(path)
    assert (t.turns, t.actions, t.critical) == (5, 2, frozenset({"deploy-key"}))
    assert [q.evidence for q in t.questions] == [("deploy-key",)]
    code, out = cli(server, "--transcript", str(path), "--window", "3", "--json")
    assert code == 0, out
    found = json.loads(out)["policies"]
    assert found["memevict"]["critical_retained"] == found["memevict"]["answerable_at_end"] == 1
    assert found["hindsight"]["answerable_at_end"] == 1


# -- --label, --policies and hindsight through the command line ------------------

KEY_LOG = [
    {"id": "key", "text": "deploy key sk-1", "role": "system", "at": T0},
    {"id": "hi", "text": "hi", "role": "user", "at": T0 + 60_000},
    {"id": "thanks", "text": "thanks", "role": "user", "at": T0 + 120_000},
    {"id": "ok", "text": "ok", "role": "user", "at": T0 + 180_000},
    {"question": "What is the deploy key?", "evidence": ["key"]},
]


@pytest.mark.parametrize("labeler", ["by_role", "by_role_async"])
def test_a_labeler_by_dotted_path_labels_the_log(
    server: Server, client: redis.Redis, tmp_path: Path, labeler: str
) -> None:
    # The labeler gives the system's key 10 and the chit-chat 1: with a window
    # of 2 memevict keeps the key, FIFO and LRU keep the last two turns.
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in KEY_LOG])
    spec = f"tests.simulate_labelers.{labeler}"
    code, out = cli(
        server, "--transcript", str(path), "--window", "2", "--protect-s", "0", "--label", spec,
        "--json",
    )  # fmt: skip
    assert code == 0, out
    found = json.loads(out)["policies"]
    assert found["memevict"]["answerable_at_end"] == 1 and "key" in found["memevict"]["window"]
    assert found["fifo"]["answerable_at_end"] == found["lru"]["answerable_at_end"] == 0
    assert found["fifo"]["mean_importance"] == 1 and found["memevict"]["mean_importance"] == 5.5
    assert found["hindsight"]["answerable_at_end"] == 1
    assert client.dbsize() == 0


def test_an_unlabelled_log_without_label_is_a_usage_error(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    lines = [*KEY_LOG[:2], {"id": "n", "importance": 2}]
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in lines])
    client.config_resetstat()
    result = CliRunner().invoke(
        main, ["--url", server.url, "simulate", "--transcript", str(path), "--window", "2"]
    )
    assert result.exit_code == 2, result.output
    message = result.output.strip().splitlines()[-1]
    assert message.endswith(
        "2 memory turns have no importance or category: "
        "pass --label rules or a labeler's dotted path"
    ), result.output
    assert "Traceback" not in result.output
    sent = client.info("commandstats")
    assert not {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_zadd"} & set(sent), sent
    code, out = cli(server, "--transcript", str(path), "--window", "2", "--label", "rules")
    assert code == 0, out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.simulate_labelers.nope", "has no 'nope'"),
        ("tests.simulate_labelers.not_callable", "is not callable"),
        ("no_such_module_anywhere.label", "cannot import module"),
    ],
)
def test_a_bad_labeler_is_one_line(
    server: Server, client: redis.Redis, tmp_path: Path, spec: str, message: str
) -> None:
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in KEY_LOG])
    code, out = cli(server, "--transcript", str(path), "--label", spec)
    assert code == 2 and message in out and "Traceback" not in out, out
    assert client.dbsize() == 0


def test_a_labeler_answering_a_bad_importance_is_one_line(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in KEY_LOG])
    code, out = cli(server, "--transcript", str(path), "--label", "tests.simulate_labelers.broken")
    assert code == 1 and out.startswith("Error: BadImportance") and out.count("\n") == 1, out
    assert client.dbsize() == 0


def test_policies_chooses_what_runs_and_hindsight_has_only_question_measures(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "log.jsonl", [json.dumps(x) for x in KEY_LOG])
    args = ["--transcript", str(path), "--window", "2", "--label", "rules"]
    code, out = cli(server, *args, "--policies", "lru, hindsight", "--json")
    assert code == 0, out
    found = json.loads(out)["policies"]
    assert set(found) == {"lru", "hindsight"}
    ceiling = found["hindsight"]
    assert set(ceiling) == set(found["lru"])
    assert ceiling["mean_importance"] is ceiling["window"] is ceiling["evictions"] is None
    assert (ceiling["questions"], ceiling["answerable_at_ask"]) == (1, 1)
    assert ceiling["answers"][0]["kept_at_end"] == ["key"]

    code, out = cli(server, *args, "--policies", "fifo,hindsight")
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.startswith("hindsight "))
    assert row.split()[1:] == ["-"] * 7 + ["1/1", "(100%)"] * 4, row
    assert "within 1 - 1/e of the best" in out
    assert {line.split()[0] for line in out.splitlines() if line.strip()} >= {"policy", "fifo"}
    assert "lru" not in out.split() and "memevict" not in out.split()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "fifo,random"], "choose from fifo, lru, memevict, hindsight"),
        (["--policies", ""], "choose from"),
        (["--policies", "fifo", "--grid", "half_life_s=60,600"], "need memevict in --policies"),
        (["--policies", "lru", "--protect-s", "0"], "need memevict in --policies"),
        (["--policies", "fifo,hindsight"], "hindsight needs questions"),
    ],
)
def test_bad_policies_exit_with_one_line(
    server: Server, client: redis.Redis, args: list[str], message: str
) -> None:
    code, out = cli(server, "--turns", "20", *args)
    assert code == 2 and message in out and "Traceback" not in out, out
    assert client.dbsize() == 0


def test_the_generated_transcript_has_no_hindsight_row_by_default(
    server: Server, client: redis.Redis
) -> None:
    code, out = cli(server, "--turns", "20", "--window", "5")
    assert code == 0 and "hindsight" not in out and "answerable" not in out, out


# -- several transcripts ----------------------------------------------------------


def two_logs(directory: Path) -> tuple[Path, Path]:
    """Window 1: FIFO loses the critical key in the first log, keeps it in the second."""
    directory.mkdir()
    first = [
        {"id": "k", "importance": 10, "critical": True, "at": T0},
        {"id": "x", "importance": 1},
        {"question": "k?", "evidence": ["k"]},
    ]
    second = [
        {"id": "x", "importance": 1, "at": T0},
        {"id": "k", "importance": 10, "critical": True},
    ]
    return (
        write_lines(directory / "a.jsonl", [json.dumps(x) for x in first]),
        write_lines(directory / "b.jsonl", [json.dumps(x) for x in second]),
    )


def test_several_transcripts_report_mean_min_and_max(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    a, b = two_logs(tmp_path / "logs")
    (tmp_path / "logs" / "notes.txt").write_text("not a transcript")
    args = ["--window", "1", "--protect-s", "0"]
    for given in (
        [str(tmp_path / "logs")],
        [str(tmp_path / "logs" / "*.jsonl")],
        [str(a), str(b)],
        [str(b), str(tmp_path / "logs")],  # named twice: replayed once, in the order met
    ):
        transcripts = [arg for path in given for arg in ("--transcript", path)]
        code, out = cli(server, *transcripts, *args, "--json")
        assert code == 0, out
        data = json.loads(out)
        sources = [t["transcript"]["source"] for t in data["transcripts"]]
        assert sorted(sources) == [str(a), str(b)] and data["window"] == 1
    first, second = sorted(data["transcripts"], key=lambda t: t["transcript"]["source"])
    assert first["policies"]["fifo"]["critical_retained"] == 0
    assert second["policies"]["fifo"]["critical_retained"] == 1
    fifo = data["summary"]["fifo"]
    assert fifo["critical_retained"] == {"mean": 0.5, "min": 0, "max": 1, "n": 2}
    assert fifo["mean_importance"] == {"mean": 5.5, "min": 1, "max": 10, "n": 2}
    assert data["summary"]["memevict"]["critical_retained"]["min"] == 1
    # only the first log asks a question: hindsight and the question measures over it alone
    assert data["summary"]["hindsight"]["answerable_at_end"] == {
        "mean": 1, "min": 1, "max": 1, "n": 1
    }  # fmt: skip
    assert data["summary"]["hindsight"]["mean_importance"] is None
    assert data["summary"]["fifo"]["answerable_at_end"]["n"] == 1

    code, out = cli(server, "--transcript", str(tmp_path / "logs"), *args)
    assert code == 0, out
    assert "2 transcripts; window of 1 memories." in out
    row = next(line for line in out.splitlines() if line.startswith("fifo "))
    assert "50% (0%..100%)" in row and "5.50 (1.00..10.00)" in row, row
    assert client.dbsize() == 0


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("nowhere/*.jsonl", "no file matches"), ("empty", "no *.jsonl or *.json in directory")],
)
def test_a_transcript_pattern_matching_nothing_is_a_usage_error(
    server: Server, client: redis.Redis, tmp_path: Path, pattern: str, message: str
) -> None:
    (tmp_path / "empty").mkdir()
    code, out = cli(server, "--transcript", str(tmp_path / pattern))
    assert code == 2 and message in out and "Traceback" not in out, out


def test_seeds_replays_several_generated_transcripts(server: Server, client: redis.Redis) -> None:
    code, out = cli(
        server, "--seed", "4", "--seeds", "3", "--turns", "40", "--window", "8", "--json"
    )
    assert code == 0, out
    data = json.loads(out)
    runs = data["transcripts"]
    assert [t["transcript"]["source"] for t in runs] == [
        f"generated (seed {s}, 40 turns)" for s in (4, 5, 6)
    ]
    for key in ("fifo", "lru", "memevict"):
        values = [t["policies"][key]["mean_importance"] for t in runs]
        spread = data["summary"][key]["mean_importance"]
        assert spread["min"] == min(values) and spread["max"] == max(values)
        assert spread["mean"] == pytest.approx(sum(values) / 3) and spread["n"] == 3
    assert "hindsight" not in data["summary"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--turns", "20", "--seeds", "2", "--plot", "x.png"], "--plot draws one transcript"),
        (["--turns", "20", "--sessions", "3"], "--sessions is for --generator sessions"),
        (["--generator", "sessions", "--turns", "50"], "--turns is for --generator single"),
        (["--generator", "sessions", "--turn-s", "5"], "--turn-s is for --generator single"),
        (["--transcript", "x.jsonl", "--seeds", "2"], "--seeds is for the generated"),
        (["--transcript", "x.jsonl", "--generator", "sessions"], "--generator is for the"),
        (["--generator", "tool-heavy", "--style", "texting"], "--style is for --generator sess"),
        (["--generator", "tool-heavy", "--turn-s", "5"], "--turn-s is for --generator single"),
    ],
)
def test_generator_options_that_do_not_go_together(
    server: Server, client: redis.Redis, tmp_path: Path, args: list[str], message: str
) -> None:
    write_lines(tmp_path / "x.jsonl", [json.dumps({"id": "a", "importance": 1})])
    code, out = cli(server, *(str(tmp_path / a) if "." in a else a for a in args))
    assert code == 2 and message in out, out
    assert client.dbsize() == 0


def test_the_sessions_generator_asks_questions(server: Server, client: redis.Redis) -> None:
    args = ["--generator", "sessions", "--sessions", "4", "--window", "20"]
    code, out = cli(server, *args)
    assert code == 2 and "memory turns have no importance or category" in out, out
    code, out = cli(server, *args, "--label", "rules", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["transcript"]["questions"] > 0 and data["transcript"]["sessions"] == 4
    assert set(data["policies"]) == {"fifo", "lru", "memevict", "hindsight"}
    for found in data["policies"].values():
        assert len(found["answers"]) == data["transcript"]["questions"]
        for name in ("answerable_at_ask", "fully_at_ask", "answerable_at_end", "fully_at_end"):
            assert 0 <= found[name] <= 1
        assert found["fully_at_end"] <= found["answerable_at_end"]
    assert client.dbsize() == 0


def test_the_tool_heavy_generator_asks_for_the_error_and_the_value(
    server: Server, client: redis.Redis
) -> None:
    """--generator tool-heavy: the agent conversation of memevict.simulate.tool_heavy at
    the store, its calls and results labelled as tools (the payment error a tool error);
    with no decay memevict holds the error when asked, FIFO of the same window does not."""
    args = ["--generator", "tool-heavy", "--turns", "40", "--window", "30", "--label", "rules"]
    code, out = cli(server, *args, "--grid", "half_life_memories=1e9", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["transcript"]["questions"] == 4  # (the error at 3 turns, the value)
    assert data["policies"]["fifo"]["answerable_at_ask"] == 0
    memevict = data["policies"]["memevict half_life_memories=1e+09"]
    asked = [a for a in memevict["answers"] if "payment" in a["question"]]
    assert asked and all(a["answerable_at_ask"] for a in asked), memevict["answers"]
    assert client.dbsize() == 0


def test_a_tool_heavy_transcript_marks_its_tools_for_the_labeler() -> None:
    from memevict.importance import Message, label
    from memevict.simulate.tool_heavy import ERROR_AT, tool_heavy_transcript

    t = tool_heavy_transcript(12, 3)
    turns = {e.id: e for e in memory_turns(t)}
    assert len(turns) == 48 and [e.id[0] for e in memory_turns(t)[:4]] == ["u", "c", "o", "a"]
    assert {turns[f"c{i}"].kind for i in range(12)} == {"function_call"}
    assert {turns[f"o{i}"].kind for i in range(12)} == {"function_call_output"}
    error = turns[f"o{ERROR_AT}"]
    assert error.tool_status == "error"
    seen = Message(error.text or "", error.role, error.kind, error.tool_status)
    assert label(seen).category == "tool_error"
    at = {e.id: e.at for e in memory_turns(t)}
    for q in t.questions:
        assert q.at is not None and all(at[e] < q.at for e in q.evidence)


def test_memevict_answers_more_questions_than_fifo_across_sessions(client: redis.Redis) -> None:
    """The multi-session result at a small size (docs/simulate.md, Choosing the clock):
    defaults and the rules labeler against FIFO, three seeds of 8 sessions."""
    from memevict.simulate.labels import label_transcript
    from memevict.simulate.sessions import generate_sessions

    answered: dict[str, list[float]] = {"fifo": [], "memevict": []}
    for seed in (1, 2, 3):
        t = label_transcript(generate_sessions(seed, 8), rules)
        result = simulate(
            client, t, 20, memevict_policies(20, {}, []), policies=("fifo", "memevict")
        )
        for key in answered:
            found = result.outcomes[key].answerable_at_end
            assert found is not None
            answered[key].append(found)
    assert all(m > f for m, f in zip(answered["memevict"], answered["fifo"], strict=True))
    assert sum(answered["memevict"]) >= 2 * sum(answered["fifo"]), answered
    assert client.dbsize() == 0


# -- grid values keep their types; concurrent runs never meet ---------------------


def test_grid_values_are_typed_in_the_json(server: Server, client: redis.Redis) -> None:
    assert memevict_policies(10, {}, ["clock=wall,activity"]) == {
        f"memevict clock={c}": Policy(max_hot=10, clock=c) for c in ("wall", "activity")
    }
    args = ["--turns", "30", "--window", "10", "--json", "--whitelist-cap", "3"]
    code, out = cli(server, *args, "--grid", "clock=activity,wall", "--grid", "evict_batch=0,2")
    assert code == 0, out
    found = json.loads(out)["policies"]
    entry = found["memevict clock=wall evict_batch=2"]
    assert entry["grid"] == {"clock": "wall", "evict_batch": 2}
    assert isinstance(entry["grid"]["evict_batch"], int)
    policy = entry["policy"]
    assert set(policy) == {f.name for f in fields(Policy)}
    assert (policy["max_hot"], policy["whitelist_cap"], policy["clock"]) == (10, 3, "wall")
    assert isinstance(policy["half_life_s"], float) and isinstance(policy["cold_max"], int)
    assert Policy(**policy) == Policy(max_hot=10, whitelist_cap=3, clock="wall", evict_batch=2)
    assert "policy" not in found["fifo"] and "grid" not in found["lru"]
    code, out = cli(server, "--turns", "30", "--json", "--grid", "half_life_s=60,600")
    assert code == 0, out
    grid = json.loads(out)["policies"]["memevict half_life_s=60"]["grid"]
    assert grid == {"half_life_s": 60.0} and isinstance(grid["half_life_s"], float)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("clock=wall,sundial", "clock must be one of"),
        ("clock=wall,wall", "listed twice"),
        ("clock=wall,", "values must be words"),
    ],
)
def test_bad_word_grids_exit_with_one_line(
    server: Server, client: redis.Redis, grid: str, message: str
) -> None:
    code, out = cli(server, "--turns", "20", "--grid", grid)
    assert code == 2 and message in out and "Traceback" not in out, out


def test_two_simulations_at_once_on_one_server_never_meet(
    client: redis.Redis, server: Server
) -> None:
    # Each transcript: 300 turns of importance 1, every 30th of importance 10;
    # a window of 10 ends with the ten important ones under memevict and the
    # last ten turns under FIFO and LRU.
    def transcript(name: str, offset: int) -> Transcript:
        turns = tuple(
            MemoryTurn(f"{name}{i}", 10.0 if i % 30 == offset else 1.0, T0 + i * 1000)
            for i in range(300)
        )
        return Transcript(turns, name)

    window = 10
    policies = memevict_policies(window, {"protect_s": 0, "protect_memories": 0}, [])
    other = key_name("memevict-simulate-0", "window")  # not ours: left alone
    client.set(other, "someone else's")
    start = threading.Barrier(2)
    results: dict[str, object] = {}

    def run(name: str, offset: int) -> None:
        own = server.client()
        start.wait()
        try:
            results[name] = simulate(own, transcript(name, offset), window, policies)
        except Exception as error:  # reported below
            results[name] = error
        finally:
            own.close()

    threads = [threading.Thread(target=run, args=a) for a in (("x", 0), ("y", 15))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, offset in (("x", 0), ("y", 15)):
        result = results[name]
        assert not isinstance(result, Exception), result
        outcomes = result.outcomes  # type: ignore[attr-defined]
        last = {f"{name}{i}" for i in range(290, 300)}
        important = {f"{name}{i}" for i in range(offset, 300, 30)}
        assert set(outcomes["fifo"].window) == set(outcomes["lru"].window) == last
        assert set(outcomes["memevict"].window) == important
        assert outcomes["fifo"].evictions == 290
    assert client.get(other) == b"someone else's"
    client.delete(other)
    assert client.dbsize() == 0
