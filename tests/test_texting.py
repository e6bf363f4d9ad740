"""The texting style of the multi-session generator (``generate_sessions(seed,
sessions, style="texting")``, memevict.simulate.texting): each promise, for seeds 1 to
3 at the default 20 sessions; casual dates read back as the day they say; a malformed
texting.json refused; the CLI's --style. No server."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Container, Iterator
from datetime import date, timedelta
from importlib.resources import files
from pathlib import Path
from random import Random
from typing import Any

import pytest
from click.testing import CliRunner

from memevict.cli import main
from memevict.simulate.sessions import generate_sessions
from memevict.simulate.texting import Texter, Thought, values
from memevict.simulate.transcript import MemoryTurn, Transcript
from memevict.simulate.wording import BadTemplates, load, read
from tests.test_sessions import DIGESTS, _serialized

SEEDS = (1, 2, 3)
THOUGHT_MS = 13_000  # a thought's messages: within 2 x 6 s of its first
ABBREVIATIONS = {"u", "ur", "lol", "omg", "ngl", "idk", "pls", "thx", "tbh", "bc", "rn", "wknd"}
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]")


@pytest.fixture(scope="module")
def texted() -> dict[int, Transcript]:
    return {seed: generate_sessions(seed, style="texting") for seed in SEEDS}


@pytest.fixture(scope="module")
def prose() -> dict[int, Transcript]:
    return {seed: generate_sessions(seed) for seed in SEEDS}


def turns(t: Transcript) -> list[MemoryTurn]:
    return [e for e in t.events if isinstance(e, MemoryTurn)]


def text(turn: MemoryTurn) -> str:
    assert turn.text is not None
    return turn.text


def tokens(message: str) -> int:
    """Words and punctuation marks (an emoji is one or two)."""
    return len(re.findall(r"\w+|[^\w\s]", message))


def thoughts(t: Transcript, prose: Transcript) -> Iterator[list[MemoryTurn]]:
    """The messages of each thought: from the time of a prose turn to the next's."""
    starts = [turn.at for turn in turns(prose)]
    messages = turns(t)
    for start, end in itertools.pairwise([*starts, messages[-1].at + 1]):
        yield [m for m in messages if start <= m.at < end]


def evidence(t: Transcript) -> list[MemoryTurn]:
    named = {e for q in t.questions for e in q.evidence}
    return [x for x in turns(t) if x.id in named]


# -- the style argument and the prose default -------------------------------------


def test_prose_is_the_default_and_what_the_pinned_digests_say() -> None:
    for seed in (0, 1):
        assert generate_sessions(seed, style="prose") == generate_sessions(seed)
    assert hashlib.sha256(_serialized(generate_sessions(0))).hexdigest() == DIGESTS[20][0]


@pytest.mark.parametrize("bad", ["txt", "", "Texting", None])
def test_an_unknown_style_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="style must be one of prose, texting"):
        generate_sessions(1, 4, style=bad)


def test_the_same_seed_gives_the_same_texting_and_other_seeds_another(
    texted: dict[int, Transcript],
) -> None:
    assert generate_sessions(1, style="texting") == texted[1]
    assert generate_sessions(2, 4, style="texting") == generate_sessions(2, 4, style="texting")
    assert texted[1].events != texted[2].events
    assert texted[1].source == "generated sessions (seed 1, 20 sessions, texting)"


# -- the same conversation --------------------------------------------------------


def test_each_prose_turn_is_one_to_three_messages_of_its_speaker_from_its_time(
    texted: dict[int, Transcript], prose: dict[int, Transcript]
) -> None:
    for seed in SEEDS:
        said = list(thoughts(texted[seed], prose[seed]))
        assert len(said) == prose[seed].turns  # one thought a prose turn
        for turn, messages in zip(turns(prose[seed]), said, strict=True):
            assert 1 <= len(messages) <= 3
            assert messages[0].at == turn.at
            for m in messages:
                assert (m.role, m.speaker, m.session) == (turn.role, turn.speaker, turn.session)
            gaps = [b.at - a.at for a, b in itertools.pairwise(messages)]
            assert all(2_000 <= g <= 6_000 for g in gaps), gaps


def test_messages_are_unlabelled_counted_from_one_a_session_and_in_time(
    texted: dict[int, Transcript],
) -> None:
    for t in texted.values():
        assert t.unlabelled == t.turns == len(t.events)
        for session, found in itertools.groupby(turns(t), key=lambda m: m.session):
            ids = [m.id for m in found]
            assert ids == [f"S{session}:T{i}" for i in range(1, len(ids) + 1)]
        times = [m.at for m in turns(t)]
        assert all(a < b for a, b in itertools.pairwise(times))
        assert all(text(m).strip() == text(m) and text(m) for m in turns(t))


def test_the_same_questions_with_evidence_in_the_messages_of_the_prose_evidence(
    texted: dict[int, Transcript], prose: dict[int, Transcript]
) -> None:
    for seed in SEEDS:
        t, p = texted[seed], prose[seed]
        thought_of = {
            m.id: turn.id
            for turn, messages in zip(turns(p), thoughts(t, p), strict=True)
            for m in messages
        }
        at = {m.id: m.at for m in turns(t)}
        user_times = {m.at for m in turns(t) if m.role == "user"}
        assert len(t.questions) == len(p.questions)
        for q, was in zip(t.questions, p.questions, strict=True):
            assert q.question == was.question
            assert sorted(thought_of[e] for e in q.evidence) == sorted(was.evidence)
            if was.at is None:
                assert q.at is None
            else:  # after the last message of the thought it was asked after
                assert q.at is not None and q.at in user_times
                assert 0 <= q.at - was.at < THOUGHT_MS
                assert all(at[e] < q.at for e in q.evidence)


def test_the_evidence_message_holds_the_values_the_questions_ask_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[tuple[str, Container[str] | None, Thought]] = []
    thought = Texter.thought

    def recorded(self: Texter, text: str, keep: Container[str] | None = None) -> Thought:
        found = thought(self, text, keep)
        said.append((text, keep, found))
        return found

    monkeypatch.setattr(Texter, "thought", recorded)
    t = generate_sessions(1, style="texting")
    messages = iter(turns(t))
    of = {
        next(messages).id: (text, keep, found, i)
        for text, keep, found in said
        for i in range(len(found.messages))
    }
    assert len(of) == t.turns
    by_id = {m.id: text(m).lower() for m in turns(t)}
    checked = 0
    for q in t.questions:
        for e in q.evidence:
            marked, keep, found, i = of[e]
            assert keep is not None and i == found.key
            kept = [value.lower() for name, value in values(marked) if name in keep]
            assert kept, marked  # every statement says what its questions ask
            assert all(value in by_id[e] for value in kept), (kept, by_id[e])
            # the messages before it in its thought are only what every question names
            for earlier in found.messages[:i]:
                assert not [v for v in kept if len(v) >= 4 and v in earlier.lower()], earlier
            checked += 1
    assert checked >= 150


# -- how it is said ---------------------------------------------------------------


def test_most_messages_and_most_evidence_are_short(texted: dict[int, Transcript]) -> None:
    every = [tokens(text(m)) for t in texted.values() for m in turns(t)]
    said = [tokens(text(m)) for t in texted.values() for m in evidence(t)]
    assert sum(n < 20 for n in every) >= 0.95 * len(every)
    assert sum(n < 20 for n in said) >= 0.9 * len(said)
    assert sum(every) / len(every) <= 9


def test_most_messages_are_lowercase_and_some_are_not(texted: dict[int, Transcript]) -> None:
    messages = [text(m) for t in texted.values() for m in turns(t)]
    lower = sum(m == m.lower() for m in messages) / len(messages)
    assert 0.8 <= lower <= 0.97, lower
    assert (
        sum(
            "'" not in m and re.search(r"\b(dont|cant|im|thats)\b", m) is not None for m in messages
        )
        >= 30
    )


def test_common_abbreviations_are_used(texted: dict[int, Transcript]) -> None:
    words = [
        set(re.findall(r"[a-z']+", text(m).lower())) for t in texted.values() for m in turns(t)
    ]
    used = set().union(*words) & ABBREVIATIONS
    assert used == ABBREVIATIONS
    assert sum(bool(w & ABBREVIATIONS) for w in words) >= 0.15 * len(words)


def test_some_messages_have_an_emoji_or_a_typo(
    texted: dict[int, Transcript], prose: dict[int, Transcript]
) -> None:
    messages = [text(m) for t in texted.values() for m in turns(t)]
    emoji = sum(EMOJI.search(m) is not None for m in messages) / len(messages)
    assert 0.08 <= emoji <= 0.3, emoji
    # a typo: a word said nowhere in the prose conversations nor in texting.json
    known = {
        w.replace("'", "")
        for said in (
            *(text(m) for t in prose.values() for m in turns(t)),
            (files("memevict.simulate") / "templates" / "texting.json").read_text("utf-8"),
        )
        for w in re.findall(r"[a-z']+", said.lower())
    }
    typos = [
        m for m in messages if set(re.findall(r"[a-z]{4,}", m.lower().replace("'", ""))) - known
    ]
    assert 0.03 * len(messages) <= len(typos) <= 0.15 * len(messages), len(typos)


def test_a_quarter_to_a_half_of_the_thoughts_are_split(
    texted: dict[int, Transcript], prose: dict[int, Transcript]
) -> None:
    said = [len(m) for seed in SEEDS for m in thoughts(texted[seed], prose[seed])]
    split = sum(n > 1 for n in said) / len(said)
    assert 0.25 <= split <= 0.5, split
    assert sum(n == 3 for n in said) >= 0.03 * len(said)


def test_dates_and_times_are_casual(
    texted: dict[int, Transcript], prose: dict[int, Transcript]
) -> None:
    """The evidence's dates as texted, never as written ("June 14": 145 in prose)."""
    days = "|".join(WEEKDAYS) + "|" + "|".join(d.lower() for d in read().weekdays)
    relative = re.compile(
        r"\b(tmrw|tomorrow|in a week|a week from today|(this|next) (wknd|weekend)"
        rf"|(this |next )?({days})( after next)?)\b"
    )
    written = re.compile(r"\b(" + "|".join(read().months) + r") \d")

    def count(pattern: re.Pattern[str], ts: dict[int, Transcript], lower: bool = True) -> int:
        said = [text(m).lower() if lower else text(m) for t in ts.values() for m in evidence(t)]
        return sum(pattern.search(m) is not None for m in said)

    assert count(relative, texted) >= 10  # "next fri", "sat after next", "this wknd"
    assert count(re.compile(r"\bthe \d{1,2}(st|nd|rd|th)\b"), texted) >= 10  # "on the 14th"
    assert count(re.compile(r"\b\d{1,2}/\d{1,2}\b"), texted) >= 10  # "6/14"
    assert count(re.compile(r"\bat \d{1,2}(:\d\d)?(?! ?[ap]m)\b"), texted) >= 5  # "at 7"
    assert count(written, texted, lower=False) == 0
    assert count(written, prose, lower=False) >= 100


# -- casual dates say the right day -----------------------------------------------


def _day(said: str, today: date) -> set[date]:
    """The days a casual date can mean, said on ``today`` (several for "next wknd")."""
    names = read().texting
    monday = today - timedelta(days=today.weekday())
    if said in ("tmrw", "tomorrow"):
        return {today + timedelta(days=1)}
    if said in ("day after tmrw", "in 2 days"):
        return {today + timedelta(days=2)}
    if found := re.fullmatch(r"(this|next) (wknd|weekend)", said):
        start = monday + timedelta(weeks=found[1] == "next")
        return {start + timedelta(days=5), start + timedelta(days=6)}
    full = [d.lower() for d in read().weekdays]
    if said in ("a week from today", "in a week"):
        return {today + timedelta(weeks=1)}
    if found := re.fullmatch(r"(this |next )?(\w+)( after next)?", said):
        day = found[2]
        if day in names.weekdays or day in full:
            n = names.weekdays.index(day) if day in names.weekdays else full.index(day)
            weeks = 2 if found[3] else found[1] == "next "
            return {monday + timedelta(weeks=weeks, days=n)}
    if found := re.fullmatch(r"the (\d+)(st|nd|rd|th)", said):
        return {
            d for d in (today + timedelta(days=i) for i in range(1, 32)) if d.day == int(found[1])
        }
    months = [m.lower() for m in read().months]
    if found := re.fullmatch(r"(\d+)/(\d+)", said):
        month, day = int(found[1]), int(found[2])
    elif found := re.fullmatch(r"([a-z]+) (\d+)(?:st|nd|rd|th)?", said):
        month = 1 + (
            names.months.index(found[1]) if found[1] in names.months else months.index(found[1])
        )
        day = int(found[2])
    else:
        raise AssertionError(f"not a date: {said!r}")
    return {
        date(y, month, day) for y in (today.year, today.year + 1) if date(y, month, day) > today
    }


def test_a_casual_date_means_the_day() -> None:
    """Said on each day of a week, every date 1 to 199 days ahead, four times."""
    texter = Texter(Random(1), read())
    forms = set()
    for weekday in range(7):
        today = date(2024, 5, 13) + timedelta(days=weekday)  # Monday May 13, 2024 and on
        for ahead in range(1, 200):
            day = today + timedelta(days=ahead)
            for _ in range(4):
                said, bare = texter.date(day, today)
                forms.add(re.sub(r"\d+", "N", said))
                meant = _day(said, today)
                assert day in meant, (today, day, said)
                if said.startswith("the "):
                    assert min(meant) == day  # "the 14th": the first 14th from today
                else:
                    assert len(meant) <= 2  # (a weekend: Saturday or Sunday)
                # said without "on" before it: "it's tmrw", "moved to next fri"
                assert bare == bool(
                    re.match(r"(this|next|tmrw|tomorrow|day after|in|a week)\b", said)
                )
    assert {"tmrw", "day after tmrw", "the Nth", "N/N", "next wknd", "in a week"} <= forms
    assert {"sat", "this fri", "next tue", "wed after next", "june Nth"} <= forms


def test_a_thought_with_values_to_keep_is_cut_only_before_them() -> None:
    texter = Texter(Random(5), read())
    marked = (
        "big news: my friend \x01who\x02Priya\x03 is getting married in "
        "\x01place\x02Lisbon\x03 on \x01date\x02the 14th\x03!"
    )
    cuts = set()
    for _ in range(300):
        found = texter.thought(marked, {"place", "date"})
        assert found.key is not None
        key = found.messages[found.key].lower()
        assert "lisbon" in key and "the 14th" in key
        assert all("lisbon" not in m.lower() for m in found.messages[: found.key])
        cuts.add(len(found.messages[: found.key]))
    assert cuts == {
        0,
        1,
        2,
    }  # whole; "big news" | ...; and "my friend priya is getting married" too
    assert texter.thought("hey, how are you doing today?").key is None


# -- texting.json -----------------------------------------------------------------


def _templates(tmp_path: Path, change: Any) -> Path:
    for source in files("memevict.simulate").joinpath("templates").iterdir():
        if source.name.endswith(".json"):
            (tmp_path / source.name).write_text(source.read_text("utf-8"), "utf-8")
    data = json.loads((tmp_path / "texting.json").read_text("utf-8"))
    change(data)
    (tmp_path / "texting.json").write_text(json.dumps(data), "utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["chances"].update(typo=1.5),
            r"texting.json: chances: typo: is not a number from 0 to 1",
        ),
        (lambda d: d["chances"].pop("emoji"), r"texting.json: chances: has no 'emoji'"),
        (
            lambda d: d["dates"][0].update(week=0),
            r"texting.json: dates\[0\]: says which dates it is for with one of",
        ),
        (
            lambda d: d["dates"][1]["say"].append("{weekdy}"),
            r"texting.json: dates\[1\]: say\[\d+\]: '\{weekdy\}' names \{weekdy\}",
        ),
        (
            lambda d: d["times"]["on the hour"].append("{mm}"),
            r"texting.json: times: on the hour\[\d+\]: '\{mm\}' names",
        ),
        (lambda d: d["months"].pop(), r"texting.json: months: is not a list of 12 texts"),
        (lambda d: d.update(splits=[]), r"texting.json: has 'splits', which is none of"),
    ],
)
def test_a_malformed_texting_file_is_refused(tmp_path: Path, change: Any, message: str) -> None:
    assert load(_templates(tmp_path, lambda d: None)).texting == read().texting
    with pytest.raises(BadTemplates, match=f"^templates/{message}"):
        load(_templates(tmp_path, change))


# -- the CLI ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--style", "texting"], "--style is for --generator sessions"),
        (["--transcript", "x.jsonl", "--style", "texting"], "--style is for the generated"),
        (["--generator", "sessions", "--style", "txt"], "'txt' is not one of 'prose', 'texting'"),
    ],
)
def test_style_goes_with_the_sessions_generator_only(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "x.jsonl").write_text(json.dumps({"id": "a", "importance": 1}), "utf-8")
    args = [str(tmp_path / a) if a.endswith(".jsonl") else a for a in args]
    # (no server: the options are refused before any connection)
    result = CliRunner().invoke(main, ["--url", "redis://127.0.0.1:1", "simulate", *args])
    assert result.exit_code == 2 and message in result.output, result.output
