"""The per-question baselines (memevict.simulate.baselines) on a small conversation worked
out by hand, their relevance against the store's search on a real server, and
``memevict simulate --per-question`` on the tiny LoCoMo-shaped file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from memevict import MemoryStore
from memevict.cli import main
from memevict.integrations._conversation import conversation_policy
from memevict.simulate.baselines import fifo, fifo_slice, relevance, search_alone
from memevict.simulate.recall_on_read import (
    during_schedule,
    recall_on_read,
    recall_on_read_json,
    recall_on_read_table,
)
from memevict.simulate.transcript import MemoryTurn, Question, Transcript
from tests.locomo_fixture import tiny_sample
from tests.servers import Server

# Six messages; a message costs one token a word. "the and" holds only function words,
# so no term: it is no match and not counted in N. The other five hold terms, so N = 5:
# apple in m1 m5 (n = 2), banana in m1 m3 m5 (n = 3), cherry in m2 m5 (n = 2).
MESSAGES = [
    ("m1", "apple banana"),
    ("m2", "cherry pie"),
    ("m3", "banana split"),
    ("m4", "the and"),
    ("m5", "apple cherry banana"),
    ("m6", "dog"),
]
QUERY = "Banana and cherry?"  # terms: banana, cherry ("and" is a function word)
BANANA = math.log(1 + (5 - 3 + 0.5) / (3 + 0.5))  # ln(12/7) = 0.539
CHERRY = math.log(1 + (5 - 2 + 0.5) / (2 + 0.5))  # ln(2.4) = 0.875
# Best first: m5 (both, 1.414), m2 (0.875), then m3 and m1 (0.539 each: the newer first).


def words(text: str) -> int:
    return len(text.split())


def test_relevance_is_bm25_with_each_term_once_and_no_length_norm() -> None:
    found = relevance(MESSAGES, QUERY)
    assert found == pytest.approx({"m1": BANANA, "m2": CHERRY, "m3": BANANA, "m5": BANANA + CHERRY})
    assert relevance(MESSAGES, "zebra") == {} and relevance(MESSAGES, "what and the") == {}
    # a term said twice in a message or in the query counts once
    assert relevance([("a", "kayak kayak"), ("b", "tent")], "kayak kayak?") == pytest.approx(
        {"a": math.log(1 + 1.5 / 1.5)}
    )


@pytest.mark.parametrize(
    ("budget", "kept"),
    [
        (2, ["m2"]),  # m5 (3 tokens) does not fit, m2 does
        (4, ["m5"]),  # m5, then 1 token left: m2, m3, m1 (2 each) do not fit
        (5, ["m2", "m5"]),
        (7, ["m2", "m3", "m5"]),  # m3 before m1: the newer of a tie
        (100, ["m1", "m2", "m3", "m5"]),  # m4 and m6 match nothing: never taken
    ],
)
def test_search_alone_takes_the_best_matches_that_fit(budget: int, kept: list[str]) -> None:
    assert search_alone(MESSAGES, QUERY, budget, words) == kept


def test_fifo_takes_the_newest_until_one_does_not_fit() -> None:
    assert fifo(MESSAGES, 3, words) == ["m6"]  # m5 would make 4
    assert fifo(MESSAGES, 6, words) == ["m4", "m5", "m6"]
    assert fifo(MESSAGES, 0, words) == []


@pytest.mark.parametrize(
    ("share", "kept"),
    [
        # FIFO in 10 - 3 = 7: m6 m5 m4 (6 tokens; m3 would make 8); in the 4 left, the best
        # older matches: m2 (2), m3 (2); m1 no longer fits
        (0.3, ["m2", "m3", "m4", "m5", "m6"]),
        # FIFO in 5: m6 m5 (4; m4 would make 6); 6 left: m2, m3, m1 (m4 matches nothing)
        (0.5, ["m1", "m2", "m3", "m5", "m6"]),
        # FIFO in the whole 10: m6 .. m2 (10 tokens); m1 would make 12
        (0.0, ["m2", "m3", "m4", "m5", "m6"]),
    ],
)
def test_fifo_slice_fills_what_fifo_leaves_with_the_best_older_matches(
    share: float, kept: list[str]
) -> None:
    assert fifo_slice(MESSAGES, QUERY, 10, share, words) == kept


def test_fifo_slice_refuses_a_share_outside_zero_to_one() -> None:
    with pytest.raises(ValueError, match="share"):
        fifo_slice(MESSAGES, QUERY, 10, 1.5, words)


def test_the_relevance_is_the_stores(client: redis.Redis) -> None:
    """The same messages in a namespace with an index: its search gives the same
    relevances, in the same order (ties to the newer)."""
    store = MemoryStore(client, "baselines", conversation_policy(1000))
    for i, (id, text) in enumerate(MESSAGES):
        store.remember(id, 1.0, text=text, now=1_700_000_000_000 + i)
    found = store.search(QUERY)
    assert [m.memory.id for m in found] == ["m5", "m2", "m3", "m1"]
    assert {m.memory.id: m.relevance for m in found} == pytest.approx(relevance(MESSAGES, QUERY))


def test_simulate_per_question_on_the_tiny_file(server: Server, tmp_path: Path) -> None:
    """The tiny file: 30 turns of 10 tokens ("Ana says line 3"...), 3 questions asked at the
    end, their evidence D1:3 or D2:12 (Q1), D2:5 or D1:5 (Q2), D2:14 (Q3). The questions
    ("Q1?") hold no term, so nothing matches them: search alone covers none, and FIFO +
    slice is FIFO. At 100 tokens, a question costs 1: FIFO in 99 holds the newest 9 turns
    (D2:7..D2:15), so Q1 and Q3. At 400 everything fits: all 3 for FIFO and the window."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny_sample()))
    args = ["--url", server.url, "simulate", "--transcript", str(path), "--label", "rules"]
    args += ["--per-question", "--budgets", "100,400"]
    done = CliRunner().invoke(main, [*args, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    asked = report["per_question"]["question"]
    small, large = asked["100"], asked["400"]
    assert small["questions"] == large["questions"] == 3
    assert (small["fifo"], small["fifo_slice"], small["search"]) == (2, 2, 0)
    assert (large["fifo"], large["fifo_slice"], large["search"]) == (3, 3, 0)
    assert (large["window"], large["window_recall"]) == (3, 3)
    assert small["window_recall"] == small["window"] <= 3  # (no term: nothing recalled)
    # Harder: the query is the last user message, "Ana says line 14......" (D2:14), with
    # the whole 100 tokens. Its terms: "says" and "line" are in all 30 turns, "ana" in
    # Ana's 15, "14" in D1:14 and D2:14 (both Ana's). Search alone: D2:14, D1:14, then
    # Ana's 8 newest others (D2:12 .. D2:2, D1:13, D1:11): Q1 (D2:12) and Q3 (D2:14).
    # FIFO: D2:6..D2:15, Q1 and Q3 too.
    before = report["per_question"]["previous"]["100"]
    assert (before["search"], before["fifo"]) == (2, 2)
    # The table: the five rows, both queries
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    for title in ("FIFO", "FIFO + slice", "search alone", "window", "window + recall"):
        assert f"  {title}  " in done.output
    assert "Harder: the user message before the question" in done.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--per-question", "--window", "10"], "--window is not for --per-question"),
        (["--per-question", "--grid", "protect_s=0,1"], "--grid is not for --per-question"),
        (["--per-question", "--max-tokens", "100"], "--max-tokens: --per-question sets it"),
        (["--per-question", "--budgets", "100,0"], "positive token counts"),
        (["--per-question", "--budgets", "a lot"], "positive token counts"),
        (["--budgets", "100"], "--budgets is for --per-question"),
        (["--recall-on-read"], "--recall-on-read is for --per-question"),
        (["--per-question"], "needs questions"),  # (the single-session generator asks none)
    ],
)
def test_options_that_do_not_go_with_per_question(args: list[str], message: str) -> None:
    """Refused before any server is reached (no --url: none is started)."""
    done = CliRunner().invoke(main, ["simulate", "--turns", "10", *args])
    assert done.exit_code == 2 and message in done.output, done.output


# -- recall on read (issue 39): A, context(query) read-only, against B, recalling ----------

T0 = 1_700_000_000_000


def _turn(n: int, text: str, session: str = "1") -> MemoryTurn:
    role = "user" if n % 2 == 1 else "assistant"
    return MemoryTurn(f"t{n}", 0.5, T0 + n * 1000, text, role=role, session=session)


def _filler(n: int) -> str:
    return " ".join(f"w{n}x{j}" for j in range(10))  # 10 terms no other turn holds


def test_during_schedule_asks_after_the_evidence_session_or_when_the_transcript_does() -> None:
    events = [_turn(n, _filler(n), "1" if n <= 3 else "2") for n in range(1, 7)]
    questions = (
        Question("a?", ("t2",)),  # session 1 ends with t3 (event 2)
        Question("b?", ("t1", "t5")),  # the latest evidence, t5, is in session 2: the end
        Question("c?", ("t1",), at=T0 + 4000),  # asked when the transcript asks: after t4
        Question("d?", ("nobody",)),  # no evidence said: at the end
    )
    found = during_schedule(Transcript(tuple(events), "hand", questions))
    assert found == {2: [0], 3: [2], 5: [1, 3]}


def test_recall_on_read_recalls_what_a_read_brought_and_b_keeps_it_hot(
    client: redis.Redis,
) -> None:
    """60 tokens (a word a token): the hot tier holds the 6 newest 10-word turns, so t1,
    the kayak trip, is cold long before t21 (a user message) asks about it. The read for
    t21 brings t1 back on both sides (the query matches it); only B recalls it, so it is
    hot and fresh for the question after t23, whose words ("Q?") match nothing: B's plain
    window and B's context for the question hold t1, A's do not."""
    kayak = "we planned a kayak trip to norway in june together"
    turns = [_turn(1, kayak)] + [_turn(n, _filler(n)) for n in range(2, 21)]
    turns += [_turn(21, "remember the kayak trip to norway we talked about then")]
    turns += [_turn(n, _filler(n)) for n in (22, 23)]
    question = Question("Q?", ("t1",), at=T0 + 23_000)
    transcript = Transcript(tuple(turns), "hand", (question,))
    results = recall_on_read(client, transcript, [60], tokens_of=words, prefix="ror")
    assert [(r.budget, r.placement) for r in results] == [(60, "during"), (60, "end")]
    for r in results:
        a, b = r.sides["read_only"], r.sides["recall"]
        assert (a.asked, b.asked) == ((False,), (True,))
        assert (a.plain, b.plain) == ((False,), (True,))
        # 12 user turns' reads and the question; B recalled t1, once
        assert a.reads == b.reads == 13 and (a.recalls, b.recalls) == (0, 1)
        assert a.recall_usec == 0 < b.recall_usec and a.read_usec > 0
        assert a.exchanges == b.exchanges == 11  # (t1's read has no turn before it)
    assert results[1].sides["recall"].recent_after is not None
    found = recall_on_read_json(results)["totals"]["during"]["60"]
    assert (found["gains"], found["losses"], found["questions"]) == (1, 0, 1)
    assert not client.keys("ror-*")  # cleared after
    table = recall_on_read_table(results)
    assert "the question as the query" in table and "+100.0" in table


def test_simulate_recall_on_read_on_the_tiny_file(server: Server, tmp_path: Path) -> None:
    """The command: both placements, both sides, the totals and each transcript's counts.
    The tiny file's questions ("Q1?") hold no term: asking them recalls nothing."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny_sample()))
    args = ["--url", server.url, "simulate", "--transcript", str(path), "--label", "rules"]
    args += ["--per-question", "--recall-on-read", "--budgets", "100"]
    done = CliRunner().invoke(main, [*args, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)["recall_on_read"]
    for placement in ("during", "end"):
        entry = report["totals"][placement]["100"]
        assert entry["questions"] == 3 and entry["transcripts"] == 1
        assert entry["read_only"]["recalls"] == 0 and entry["read_only"]["reads"] > 0
    assert len(report["transcripts"]) == 2
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    assert "3 questions asked during the conversation" in done.output
    assert "recall calls a read" in done.output
