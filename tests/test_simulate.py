"""memevict simulate: the generated workload, the JSONL reader, FIFO and LRU
worked out by hand, the qualitative result, and the command line."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from memevict import Policy
from memevict.cli import main
from memevict.simulate import BadTranscript, generate, memevict_policies, read_jsonl, simulate
from memevict.simulate import plot as simulate_plot
from memevict.simulate.policies import FifoRunner, LruRunner, MemevictRunner
from memevict.simulate.replay import replay
from memevict.simulate.transcript import Action, MemoryTurn, Transcript
from tests.servers import Server

# The README's reference table and the generator's documented proportions.
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
    ('{"id": "a"}', 'exactly one of "importance" and "category"'),
    ('{"id": "a", "importance": 1, "category": "context"}', "exactly one of"),
    ('{"id": "a", "category": "gossip"}', '"category" must be one of'),
    ('{"id": "a", "category": null}', '"category" must be one of'),
    ('{"id": "a", "importance": 0}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": -3}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": NaN}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": 1e400}', '"importance" must be a finite number > 0'),
    ('{"id": "a", "importance": "5"}', '"importance" must be a number'),
    ('{"id": "a", "importance": true}', '"importance" must be a number'),
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
    args = ["--turns", "40", "--window", "10", "--json", "--grid", "half_life_s=60,3600"]
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


def test_the_readme_log_replays_as_written(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```jsonl\n", 1)[1].split("```", 1)[0]
    path = write_lines(tmp_path / "my-agent.jsonl", block.splitlines())
    t = read_jsonl(path)
    assert (t.turns, t.actions, t.critical) == (5, 2, frozenset({"deploy-key"}))
    code, out = cli(server, "--transcript", str(path), "--window", "3", "--json")
    assert code == 0, out
    assert json.loads(out)["policies"]["memevict"]["critical_retained"] == 1
