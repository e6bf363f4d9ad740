"""The multi-session conversation generator: each promise of its docstring,
for seeds 1 to 5 at the default 20 sessions, the JSONL the CLI reads, the
transcripts of seeds 0 to 9 as they were before the templates became data,
and the checks of a malformed template file."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import START_MS, MemoryTurn, Transcript, parse_lines
from memevict.simulate.wording import BadTemplates, load

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


# -- the templates as data ----------------------------------------------------

# SHA-256 of the transcripts of seeds 0 to 9 (serialized as _serialized does), recorded
# from commit 498446f's generator: the sessions.py whose names, pools and templates were
# Python code, before they moved to loader/memevict/simulate/templates/*.json (issue 37).
# They are not outputs of the code under test: the move had to leave every turn and
# question as it was. An edit of the templates changes them (templates/README.md).
DIGESTS = {
    2: (
        "086b34868dd872721e013868c4878e8f9a25173bfd7ce51521419dfc5d833785",
        "44cc7596697cbe663b4a9a4255eb24f262622670645c498c21e7df55578910e5",
        "375c67b1302885f17689c7768a5a01a53fee05c805fde98ddf55ac449795b15e",
        "9d4ec606616819e169144eb8b3d30c0d7ac28623d92199a0771ca5cc4ea75bf3",
        "fcfe9453350ee175290e01de944d0c4f510d770ec582ce0cc1a53fa00cd29cad",
        "6322e91597b5ab142df29f2a1819594fe5a746a8572477e2a4763fb10c126f46",
        "603ba1a4ea351b633d8a24ff32dc4871285ead4cd95f4e58e0687c9d6bb4cd05",
        "21aaee6651e852ee7a2c5834926c19c38e08f3959e9ba06f9004c7ba906eb09b",
        "c8ec74a9bfe8684a60485dcd783f7f055678bf00779d9cd7c3a07028b6e2bcbc",
        "fe111c3ee08bda2d378a69d56a2660fc004597cd68dd5cc26b1e3a2dff3357d8",
    ),
    4: (
        "2b096f8821b92532f0ca223634ed9b74944593ccda398126b1f02601f1767387",
        "53484158a85f4e77685fb045d09eee0a83cdbb959732f5e9400107a7092ab5a2",
        "19fb5594388f0829b4b24ca446a3b1c74b0d228c2aa67b84c8c3eab769e7d016",
        "0c6c72dac25eeb750e8bb42ee79297fb2b0f73ffbabbbd8cc1dc615561c1a14e",
        "ed9670efbeaf4c9b7752ff46a07f2b42df30e7a9d810862d9c839b05377a541a",
        "292056eab8887358c80e5b6c87a2886b8962492061cd5ea0225f16f3328a819d",
        "6f3c858444510cedba5068b9f29ddf4bf3c3d3a6ebcdddaf60322290f95ee25d",
        "efcab9c9b78968fb4fea5c6b259c26dec47ed303fc5d4b8935964e233dbc42be",
        "4649445a47fb1b2ccf081267467738a580bb0d300da08c8f49b36f6cdf89f650",
        "3aaf74bbe55acbf23fff4ee21bc559a5f3a65f0bf3fa2de7e30983a18c0da8b5",
    ),
    8: (
        "5fd740e08cfe4e5d7bf03e88e95136e5beec7868f22f41277bb99c27f31b9a6f",
        "ef8181153533ae9d4b2b97ff36f0fc047a61d0a6ca5de0714aea2664b75a0055",
        "e56ccb1ee2beda13ad1f9c40e0e74c4318c15f5cf613107b7658d283182ddbb5",
        "c378aad3e938fe5dde7a496bc614b27a363796ec2f437cd4745981adb382ee3b",
        "8c02ccd11c44233db7d5deba8582751d5912ec017be3d89d6ef8042c5795fd92",
        "6ed41028b18766956954c20d5e3a3790c909abb50ef2fe5df434e982a8e6db60",
        "11cb636206bf0f6383c00ca4272e69e7f70568835d1ce8d703c695fe3ade9c2e",
        "ef1a61ac3515de81cba419801b022585e86b435e50d24c6dfde6468070cfbf11",
        "2b9197e63c97953e3debd154948f9f24d951a6b0b8d765ee25d454f985772966",
        "c0cf15a7cc4f9aeab4e3dbe7ede4d3414b1bfaf1d32b48878d0cc65e5edd9e95",
    ),
    20: (
        "c8f8995a23dd21d6b7685d6e5f9c5f522283e6dde16cea8044bd28020ed524e3",
        "d979aef53da4c27f5a4b1e1ddb6db72e946e4d117ad87e85f59203d0b921daba",
        "3541c53d30db62e423d4b7ba1b9aa457ece0759f7184083445bda8930af98184",
        "134bba6e666223467620596ae10f4d4cd1eb3ee7dedb29a34a02c4c98bc0fdbf",
        "094be48839349f9330c5fa77364dc1a4cc64a707f9561aa2e5694879e000a9ee",
        "63dc42c2f11a1ad31773c330293d262baf0c2afe0134d82df169d4727ecf5e74",
        "aefcd0840ffbffd50509cbc1475b54efe2ab9c7c1cea362b60fa7d02fbd232d4",
        "caa26ab2d739b0eaecbf9418d46df846f4a992b1836b007b221779e2e6cfcb9b",
        "245b905b4d28b5f6b6e9879832582738a1e8240d4505057e8956557d4196428f",
        "1939f0992a685c6e6230f634e2ee031ac6667612795084c827bdac6b1fd857b7",
    ),
}


# Fields a memory turn gained after 498446f, left out of the digest while empty (a
# generated session sets neither): the pinned digests stay those of the same content.
_ADDED_SINCE = ("kind", "tool_status")


def _serialized(t: Transcript) -> bytes:
    """Every field of the transcript: each turn's id, text, role, speaker, session,
    time, importance, category and flags (and _ADDED_SINCE's, when set); each
    question's text, evidence and time; the source and the notes."""
    data = dataclasses.asdict(t)
    for event in data["events"]:
        for name in _ADDED_SINCE:
            if event.get(name, "") is None:
                del event[name]
    return json.dumps(data, ensure_ascii=False, sort_keys=True).encode()


def _digests(*sessions: int) -> list[str]:
    made = (generate_sessions(seed, *sessions) for seed in range(10))
    return [hashlib.sha256(_serialized(t)).hexdigest() for t in made]


def test_seeds_0_to_9_at_the_default_20_sessions_are_what_498446f_generated() -> None:
    assert _digests() == list(DIGESTS[20])


@pytest.mark.parametrize("sessions", [2, 4, 8])
def test_seeds_0_to_9_at_fewer_sessions_are_what_498446f_generated(sessions: int) -> None:
    assert _digests(sessions) == list(DIGESTS[sessions])


def _copy(tmp_path: Path) -> Path:
    """A copy of the package's templates."""
    for source in files("memevict.simulate").joinpath("templates").iterdir():
        if source.name.endswith(".json"):
            (tmp_path / source.name).write_text(source.read_text("utf-8"), "utf-8")
    return tmp_path


def _broken(tmp_path: Path, name: str, change: Callable[[Any], object]) -> Path:
    """A copy of the package's templates whose file ``name`` ``change`` edited."""
    data = json.loads((_copy(tmp_path) / name).read_text("utf-8"))
    change(data)
    (tmp_path / name).write_text(json.dumps(data), "utf-8")
    return tmp_path


def _wedding(facts: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return next(k for kinds in facts.values() for k in kinds if k["name"] == "wedding")


# (file, edit, what the error says: the file, the place in it and the problem)
BROKEN: list[tuple[str, Callable[[Any], object], str]] = [
    (
        "facts.json",
        lambda d: _wedding(d)["says"].__setitem__(0, "{whom} is getting married"),
        r"facts.json: wedding: says\[0\]: '\{whom\} is getting married' names \{whom\}",
    ),
    ("facts.json", lambda d: _wedding(d).pop("value"), r"facts.json: wedding: has no 'value'"),
    (
        "facts.json",
        lambda d: _wedding(d).update(replys=[]),
        r"facts.json: wedding: has 'replys', which is none of",
    ),
    (
        "facts.json",
        lambda d: _wedding(d)["slots"].update(place={"pick": "citys"}),
        r"facts.json: wedding: slots: place: pick: 'citys' is no pool of pools.json",
    ),
    (
        "facts.json",
        lambda d: _wedding(d)["slots"].update(place={"pick": "cities", "for": "who"}),
        r"facts.json: wedding: slots: place: picks for 'who', which is not picked from",
    ),
    (
        "facts.json",
        lambda d: _wedding(d)["slots"].update(date={"days ahead": [150, 40]}),
        r"facts.json: wedding: slots: date: days ahead: \[150, 40\]: the lowest is above",
    ),
    (
        "facts.json",
        lambda d: _wedding(d).update(rises=True),
        r"facts.json: wedding: rises: is for a number or dollars that moves",
    ),
    (
        "facts.json",
        lambda d: _wedding(d).update(combine="when"),
        r"facts.json: wedding: combine: is none of \['date', 'spend'\]",
    ),
    (
        "facts.json",
        lambda d: _wedding(d).update(recap="on {date:%B}"),
        r"facts.json: wedding: recap: 'on \{date:%B\}': a slot is written \{name\}",
    ),
    (
        "chats.json",
        lambda d: d["small talk"][3]["slots"].update(friend={"one of": "friends"}),
        r"chats.json: small talk\[3\]: slots: friend: one of: 'friends' is none of",
    ),
    (
        "chats.json",
        lambda d: d["small talk"][0].update(plan="rest"),
        r"chats.json: small talk\[0\]: has 'plan', which is none of",
    ),
    ("lines.json", lambda d: d.pop("greetings"), r"lines.json: has no 'greetings'"),
    (
        "lines.json",
        lambda d: d.update(welcomes=["Hi {user}!"]),
        r"lines.json: welcomes: has no line without \{user\}",
    ),
    ("lines.json", lambda d: d.update(news="so,"), r"lines.json: news: is not a list"),
    ("pools.json", lambda d: d["months"].pop(), r"pools.json: months: is not a list of 12 texts"),
    (
        "persona.json",
        lambda d: d["groups"]["friend"].update(size=60),
        r"pools.json: names: has 50 names: too few for the 68 people drawn from it",
    ),
]


@pytest.mark.parametrize(("name", "change", "message"), BROKEN)
def test_a_malformed_template_file_is_refused_with_the_place_named(
    tmp_path: Path, name: str, change: Callable[[Any], object], message: str
) -> None:
    assert load(_copy(tmp_path))  # as it is, the copy reads
    with pytest.raises(BadTemplates, match=f"^templates/{message}"):
        load(_broken(tmp_path, name, change))


def test_a_template_file_that_is_no_json_is_refused_with_the_line_named(tmp_path: Path) -> None:
    pools = _copy(tmp_path) / "pools.json"
    text = pools.read_text("utf-8")
    pools.write_text(text.replace("]", "],", 1), "utf-8")  # a comma too many
    line = text[: text.index("]")].count("\n") + 1
    with pytest.raises(BadTemplates, match=rf"^templates/pools.json: line {line} column \d+"):
        load(tmp_path)
