"""The command line, against the test servers and the embedded server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from memevict import Item, MemoryStore, PermissionDenied, Policy
from memevict.cli import main
from memevict.functions import library
from memevict.results import Memory, ScanPage
from memevict.scripts import specs
from tests import docs
from tests.servers import Server

T0 = "1700000000000"


def run(server: Server, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--url", server.url, "--namespace", "cli", *args])
    return result.exit_code, result.output


def test_remember_get_top_stats(server: Server, client: redis.Redis) -> None:
    assert run(server, "remember", "pw", "-i", "10", "--text", "swordfish", "--now", T0)[0] == 0
    code, out = run(server, "remember", "hi", "-i", "1", "--now", T0, "--json")
    assert code == 0 and json.loads(out)["evicted"] == []
    code, out = run(server, "get", "pw", "--now", T0, "--json")
    memory = json.loads(out)
    assert code == 0 and memory["text"] == "swordfish" and memory["tier"] == "hot"
    # one memory ("hi") remembered since: one step of the default activity clock
    recency = 0.5 ** (1 / Policy().half_life_memories)
    assert 10 * recency <= memory["score"] < 10.001 * recency
    code, out = run(server, "top", "-k", "1", "--now", T0, "--json")
    assert [m["id"] for m in json.loads(out)] == ["pw"]
    code, out = run(server, "stats", "--now", T0, "--json")
    assert json.loads(out) == {
        "hot": 2,
        "cold": 0,
        "whitelisted": 0,
        "protected": 2,
        "over": 0,
        "backlog": 0,
        "tokens": 2,  # one each by default
        "over_tokens": 0,
    }


def test_search_finds_by_terms_once_the_policy_indexes(server: Server, client: redis.Redis) -> None:
    # (client: the server emptied first; namespace "cli" is every test's here)
    assert run(server, "policy", "--index", "1")[0] == 0
    run(server, "remember", "pw", "-i", "10", "--text", "the password is swordfish")
    run(server, "remember", "dog", "-i", "1", "--text", "my dog Rex")
    code, out = run(server, "search", "what was the password?", "--json")
    assert code == 0, out
    [found] = json.loads(out)
    assert found["memory"]["id"] == "pw" and found["relevance"] > 0
    code, out = run(server, "search", "rex", "--tier", "cold")
    assert (code, out.strip()) == (0, "(nothing found)")
    code, out = run(server, "search", "rex")
    assert code == 0 and out.split()[1] == "dog", out
    assert run(server, "search", "rex", "-k", "101")[0] != 0  # (BadArgument, one line)


def test_window_with_a_query_brings_back_an_evicted_match(
    server: Server, client: redis.Redis
) -> None:
    assert run(server, "policy", "--index", "1", "--max-hot", "2", "--protect-s", "0")[0] == 0
    run(server, "remember", "pw", "-i", "1", "--text", "the password is swordfish")
    run(server, "remember", "dog", "-i", "5", "--text", "my dog Rex")
    run(server, "remember", "cat", "-i", "5", "--text", "my cat Tom")  # (pw goes cold)
    # 20 more in the cold tier: "password" is rare enough to match (relevance >= 2.5).
    store = MemoryStore(client, "cli")
    store.remember_many([Item(f"x{i}", 0.1, text=f"note {i}") for i in range(20)])
    code, out = run(server, "window", "--tokens", "4")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[:-1]] == ["dog", "cat"]
    code, out = run(server, "window", "--tokens", "4", "--query", "the password?", "--share", "0.5")
    *lines, summary = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines] == ["*", "dog", "cat"], out
    assert lines[0].split()[1] == "pw"
    assert summary.endswith("; 1 brought by the query"), out
    code, out = run(server, "window", "--tokens", "4", "--query", "password", "--json")
    assert code == 0 and json.loads(out)["recalled"] == ["pw"], out
    assert run(server, "window", "--tokens", "4", "--query", "x", "--share", "2")[0] != 0


def test_policy_show_and_set(server: Server, client: redis.Redis) -> None:
    code, out = run(server, "policy", "--json")
    assert code == 1 and "does not exist" in out  # showing never creates
    code, out = run(server, "policy", "--max-hot", "5", "--half-life-s", "60", "--json")
    assert code == 0 and json.loads(out)["max_hot"] == 5
    code, out = run(server, "policy", "--json")
    assert json.loads(out)["half_life_s"] == 60.0


def test_every_command_runs(server: Server, client: redis.Redis) -> None:
    run(server, "policy", "--max-hot", "1", "--protect-s", "0")
    steps = [
        ["remember", "a", "-i", "2", "--now", T0],
        ["remember", "b", "-i", "3", "--now", T0],
        ["recall", "a", "--now", T0],
        ["whitelist", "a", "--now", T0],
        ["demote", "a", "--now", T0],
        ["touch", "a", "--now", T0],
        ["decay", "0.5"],
        ["evict", "--now", T0],
        ["forget", "a"],
        ["scripts"],
        ["load"],
    ]
    for step in steps:
        code, out = run(server, *step)
        assert code == 0, (step, out)
    code, out = run(server, "load", "--json")
    assert json.loads(out)["loaded"] == {name: spec.sha for name, spec in specs().items()}


@pytest.mark.slow  # (a replica, or a 200-turn agent: seconds)
def test_load_reaches_the_replicas(server: Server, client: redis.Redis) -> None:
    replica = Server(server.binary, extra=("--replicaof", "127.0.0.1", str(server.port))).start()
    try:
        reader = replica.client()
        deadline = time.monotonic() + 10
        while len([k for k in client.info("replication") if k.startswith("slave")]) < 1:
            assert time.monotonic() < deadline, "replica did not connect"
            time.sleep(0.05)
        reader.script_flush()
        code, out = run(server, "load", "--json")
        loaded = json.loads(out)
        assert code == 0, out
        assert loaded["nodes"] == [
            {"address": f"127.0.0.1:{server.port}", "primary": True},
            {"address": f"127.0.0.1:{replica.port}", "primary": False},
        ]
        shas = [spec.sha for spec in specs().values()]
        assert all(client.script_exists(*shas)) and all(reader.script_exists(*shas))
        # The library goes to the primary; the replica gets it by replication.
        client.function_flush()
        code, out = run(server, "load", "--functions")
        assert code == 0 and f"library {library().version}" in out, out
        # (WAIT would only cover this client's own writes, not the CLI's)
        deadline = time.monotonic() + 10
        while not reader.function_list(library=library().name):
            assert time.monotonic() < deadline, "the library did not reach the replica"
            time.sleep(0.05)
        reader.close()
    finally:
        replica.stop()


def test_bad_arguments_exit_non_zero_with_one_line(server: Server, client: redis.Redis) -> None:
    for args in (
        ["remember", "x", "-i", "nan"],
        ["remember", "", "-i", "1"],
        ["decay", "2"],
        ["recall", "nope"],
        ["get", "nope"],
        ["--namespace", "a{b", "stats"],
    ):
        code, out = run(server, *args)
        assert code != 0, args
        assert len(out.strip().splitlines()) == 1 and "Traceback" not in out, (args, out)


def test_unreachable_server_is_one_line() -> None:
    result = CliRunner().invoke(main, ["--url", "redis://127.0.0.1:1/0", "stats"])
    assert result.exit_code != 0
    assert "cannot reach the server" in result.output


def test_demo_memevict_keeps_more_critical_facts(server: Server, client: redis.Redis) -> None:
    code, out = run(server, "demo")
    assert code == 0, out
    section = out.split("Critical facts at the end:")[1].strip().split("\n\n")[0]
    header, *rows = section.splitlines()
    policies = header.split()
    assert policies == ["fifo", "lru", "memevict"] and len(rows) == 3, section
    kept = {p: sum(row.split()[1 + i] == "kept" for row in rows) for i, p in enumerate(policies)}
    assert kept["memevict"] >= 2 and kept["memevict"] > max(kept["fifo"], kept["lru"]), kept
    assert client.dbsize() == 0  # the demo's namespaces are cleared afterwards


def test_embedded_server_persists_between_commands(tmp_path: Path) -> None:
    env = {**os.environ, "MEMEVICT_HOME": str(tmp_path / "home")}
    env.pop("REDIS_URL", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memevict", *args], env=env, capture_output=True, text=True
        )

    first = cli("remember", "fact", "-i", "7", "--text", "kept across runs")
    assert first.returncode == 0, first.stderr
    second = cli("get", "fact", "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["text"] == "kept across runs"


@pytest.mark.stress
def test_stress_command_reports_and_passes(server: Server, client: redis.Redis) -> None:
    code, out = run(server, "stress", "--workers", "16", "--ops", "5", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["ok"] and report["processes"] == 16 and report["violations"] == {}
    assert report["calls"] == 32 * 5 and report["checks"] > 0


def test_acl_prints_a_line_that_creates_a_working_user(server: Server, client: redis.Redis) -> None:
    result = CliRunner().invoke(
        main, ["--namespace", "cli", "acl", "worker"], env={"MEMEVICT_ACL_PASSWORD": "pw"}
    )
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    # The line is meant for redis-cli; this one has no quoted arguments.
    assert '"' not in line
    try:
        assert client.execute_command(*line.split()) in (b"OK", "OK", True)
        worker = server.client(username="worker", password="pw")
        MemoryStore(worker, "cli").remember("a", 1.0)
        with pytest.raises(PermissionDenied):
            MemoryStore(worker, "other")
        worker.close()
    finally:
        client.execute_command("ACL", "DELUSER", "worker")


def test_the_readme_redis_cli_example_runs_as_written(server: Server, tmp_path: Path) -> None:
    """The redis-cli block of docs/lua-contract.md, run by bash against the test server."""
    redis_cli = shutil.which("redis-cli")
    if redis_cli is None:
        if os.environ.get("MEMEVICT_REQUIRE_REDIS") == "1":
            pytest.fail("redis-cli not found and MEMEVICT_REQUIRE_REDIS=1")
        pytest.skip("redis-cli not installed")
    [block] = re.findall(r"```sh\n(for s in configure remember top;.*?)```", docs.text(), re.S)
    script = block.replace("redis-cli ", f"{redis_cli} -p {server.port} ")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", "-euc", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[:18] == [
        "created",
        "3",
        "0",
        "activity",
        "1000",
        "1800",
        "10",
        "20",
        "30",
        "0.1",
        "0.001",
        "10000",
        "60",
        "0",
        "0",
        "1",
        "0",
        "0",
    ]
    score = float(out[18])
    assert 10 < score < 10.001  # importance 10 plus a jitter offset below 0.001
    assert out[19:23] == ["", "", "0", "0"]  # nothing evicted or demoted, over 0, 0 tokens
    memory = out[23:]
    assert memory[0] == "pw" and memory[3] == "hot" and memory[8] == "the password is swordfish"
    assert memory[9:] == ["1", ""]  # one token, no group
    assert float(memory[1]) == 10 and 9.99 < float(memory[2]) <= score


def assert_one_line_without_a_traceback(url: str) -> None:
    # a subprocess, as a user runs it: click's runner would hide a traceback
    done = subprocess.run(
        [sys.executable, "-m", "memevict", "--url", url, "stats"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert ("--url" in error) or ("DB index is out of range" in error), error


# (URLs redis-py cannot parse: refused before any server is reached, so once, not per server)
@pytest.mark.parametrize("url", ["notaurl", "http://127.0.0.1:6379", "127.0.0.1:6379"])
def test_a_bad_url_is_one_line_without_a_traceback(url: str) -> None:
    assert_one_line_without_a_traceback(url)


def test_a_database_the_server_lacks_is_one_line_without_a_traceback(server: Server) -> None:
    assert_one_line_without_a_traceback(f"redis://127.0.0.1:{server.port}/99")


def test_acl_without_a_password_prints_a_line_with_a_new_one() -> None:
    result = CliRunner().invoke(main, ["--namespace", "cli", "acl", "worker"], input="")
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    password = re.search(r" >(\S+) ", line)
    assert line.startswith("ACL SETUSER worker reset on >") and password is not None
    assert len(password.group(1)) >= 24
    again = CliRunner().invoke(main, ["--namespace", "cli", "acl", "worker"])
    assert again.output != result.output  # a new one each time


def test_decay_prints_json(server: Server, client: redis.Redis) -> None:
    assert run(server, "remember", "a", "-i", "1")[0] == 0  # (decay needs the namespace)
    code, out = run(server, "decay", "0.5", "--json")
    assert code == 0 and json.loads(out) == {"decayed": 0.5}


def test_evict_drains_the_whole_backlog(server: Server, client: redis.Redis) -> None:
    store = MemoryStore(
        client, "cli", Policy(max_hot=1000, protect_s=0, protect_memories=0, cold_max=10_000)
    )
    for i in range(0, 600, 100):
        store.remember_many([(f"m{k}", 1.0 + k) for k in range(i, i + 100)])
    store.set_policy(
        Policy(max_hot=10, protect_s=0, protect_memories=0, cold_max=10_000)
    )  # evicts 200 of 590
    assert store.stats().backlog > 0
    code, out = run(server, "evict", "--json")
    assert code == 0, out
    assert len(json.loads(out)["evicted"]) == 600 - 10 - 200
    assert store.stats().backlog == 0 and store.stats().hot == 10


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["get", "x"],
        ["explain", "x", "--tokens", "5"],
        ["top"],
        ["search", "x"],
        ["policy"],
        ["window"],
        ["window", "--tokens", "10", "--json"],
        ["scan"],
        ["scan", "--tier", "cold", "--all", "--json"],
        ["drop", "--yes"],
    ],
)
def test_reads_of_a_namespace_that_does_not_exist_create_nothing(
    server: Server, client: redis.Redis, command: list[str]
) -> None:
    result = CliRunner().invoke(main, ["--url", server.url, "--namespace", "nosuch", *command])
    assert result.exit_code == 1
    assert "namespace 'nosuch' does not exist" in result.output
    assert client.keys("*") == []


def test_commands_started_at_once_share_the_embedded_server(tmp_path: Path) -> None:
    env = {**os.environ, "MEMEVICT_HOME": str(tmp_path)}
    env.pop("REDIS_URL", None)
    for round in range(2):
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "memevict", "-n", "at-once", "remember", f"r{round}-{i}",
                 "-i", "2"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(6)
        ]  # fmt: skip
        for run in runs:
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0 and "Traceback" not in err, err
    done = subprocess.run(
        [sys.executable, "-m", "memevict", "-n", "at-once", "stats", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(done.stdout)["hot"] == 12  # no write lost


def test_every_command_has_json() -> None:
    missing = [
        name
        for name, command in main.commands.items()
        if not any("--json" in param.opts for param in command.params)
    ]
    assert missing == []


def test_remember_with_tokens_and_a_group(server: Server, client: redis.Redis) -> None:
    code, out = run(server, "remember", "a", "-i", "2", "--tokens", "7", "--group", "chat",
                    "--text", "hello", "--now", T0)  # fmt: skip
    assert code == 0, out
    code, out = run(server, "get", "a", "--now", T0, "--json")
    memory = json.loads(out)
    assert code == 0 and (memory["tokens"], memory["group"]) == (7, "chat"), out
    code, out = run(server, "get", "a", "--now", T0)
    assert code == 0 and "  tokens=7  group=chat  hot" in out, out
    # remembered again without --group: it keeps its group; tokens are replaced
    assert run(server, "remember", "a", "-i", "2", "--tokens", "3", "--now", T0)[0] == 0
    memory = json.loads(run(server, "get", "a", "--now", T0, "--json")[1])
    assert (memory["tokens"], memory["group"]) == (3, "chat")
    code, out = run(server, "remember", "b", "-i", "1", "--now", T0, "--json")
    assert json.loads(run(server, "get", "b", "--json")[1])["tokens"] == 1  # the default
    assert json.loads(out)["over_tokens"] == 0
    code, out = run(server, "remember", "c", "-i", "1", "--tokens", "0")
    assert code != 0 and len(out.strip().splitlines()) == 1 and "BadTokens" in out, out


def test_policy_token_budget_and_idle_expiry(server: Server, client: redis.Redis) -> None:
    code, out = run(server, "policy", "--max-tokens", "5", "--idle-ttl-s", "60", "--json")
    assert code == 0, out
    assert (json.loads(out)["max_tokens"], json.loads(out)["idle_ttl_s"]) == (5, 60.0)
    assert 0 < client.pttl("memevict:{cli}:policy") <= 60_000  # the server has it
    # two protected memories of 4 tokens: 3 over the budget, nothing evictable
    for id in ("a", "b"):
        code, out = run(server, "remember", id, "-i", "1", "--tokens", "4", "--now", T0, "--json")
        assert code == 0, out
    assert json.loads(out)["over_tokens"] == 3
    code, out = run(server, "stats", "--now", T0)
    assert code == 0 and out.splitlines()[0].split() == [
        "hot=2", "cold=0", "whitelisted=0", "protected=2", "over=0", "backlog=0", "tokens=8",
        "over_tokens=3",
    ]  # fmt: skip
    # (then where to see what left: here no log, and how to keep one)
    assert out.splitlines()[1:] == ["(no eviction log: memevict policy --log-max 1000 keeps one)"]
    code, out = run(server, "policy", "--max-tokens", "0", "--json")
    assert code == 0 and json.loads(out)["max_tokens"] == 0
    code, out = run(server, "stats", "--now", T0)  # no budget: no over_tokens
    assert code == 0 and out.splitlines()[0].split() == [
        "hot=2", "cold=0", "whitelisted=0", "protected=2", "over=0", "backlog=0", "tokens=8"
    ]  # fmt: skip


def _remember_window_memories(server: Server) -> None:
    """a to e, one ms apart: importance, tokens and group of each; b and c a group."""
    for i, (id, importance, tokens, group) in enumerate(
        [("a", "1", "5", None), ("b", "9", "4", "g"), ("c", "2", "4", "g"),
         ("d", "5", "3", None), ("e", "8", "2", None)]
    ):  # fmt: skip
        grouped = ["--group", group] if group else []
        now = str(int(T0) + i)
        code, out = run(server, "remember", id, "-i", importance, "--tokens", tokens,
                        "--text", f"say {id}", "--now", now, *grouped)  # fmt: skip
        assert code == 0, out
    # remembered again later: it keeps its place in the window's order
    assert (
        run(server, "remember", "a", "-i", "1", "--tokens", "5", "--now", str(int(T0) + 9))[0] == 0
    )


def _window(server: Server, *args: str) -> dict[str, object]:
    code, out = run(server, "window", "--now", T0, "--json", *args)
    assert code == 0, out
    window = json.loads(out)
    assert isinstance(window, dict)
    return window


def test_window_in_time_order_within_the_budget(server: Server, client: redis.Redis) -> None:
    _remember_window_memories(server)
    window = _window(server)
    memories = window["memories"]
    assert isinstance(memories, list)
    assert [m["id"] for m in memories] == ["a", "b", "c", "d", "e"]
    assert [m["text"] for m in memories] == ["say a", "say b", "say c", "say d", "say e"]
    assert (window["tokens"], window["left"]) == (18, 0)
    # ranked b (group g: b and c, 8 tokens), e, d, a; each taken if it fits
    for budget, ids, left in [
        ("10", ["b", "c", "e"], 2),
        ("9", ["b", "c"], 3),  # e, d and a do not fit in the 1 left
        ("7", ["d", "e"], 3),  # b fits alone, but the group is whole or not at all
        ("1", [], 5),
    ]:
        window = _window(server, "--tokens", budget)
        memories = window["memories"]
        assert isinstance(memories, list)
        assert [m["id"] for m in memories] == ids, budget
        assert window["tokens"] == sum(m["tokens"] for m in memories) <= int(budget)
        assert window["left"] == left, budget

    code, out = run(server, "window", "--tokens", "10", "--now", T0)
    *lines, summary = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines] == ["b", "c", "e"], out
    assert "tokens=4  group=g" in lines[0] and "'say b'" in lines[0]
    assert summary == "window: 3 memories, 10 of 10 tokens; 2 hot memories left out"
    code, out = run(server, "window", "--now", T0)
    *lines, summary = out.splitlines()
    assert [line.split()[0] for line in lines] == ["a", "b", "c", "d", "e"], out
    assert summary == "window: 5 memories, 18 tokens; 0 hot memories left out"
    code, out = run(server, "window", "--tokens", "0")
    assert code != 0 and len(out.strip().splitlines()) == 1 and "BadTokens" in out, out


def _hot_and_cold(client: redis.Redis) -> tuple[set[str], set[str]]:
    """250 memories, 200 hot and 50 cold (more than a listpack holds, so HSCAN pages)."""
    store = MemoryStore(client, "cli", Policy(max_hot=200, protect_s=0))
    ids = [f"m{i}" for i in range(250)]
    for start in range(0, 250, 100):
        store.remember_many([(id, 1.0 + i) for i, id in enumerate(ids[start : start + 100])])
    tiers = {id: store.get(id) for id in ids}
    hot = {id for id, m in tiers.items() if m is not None and m.tier == "hot"}
    cold = {id for id, m in tiers.items() if m is not None and m.tier == "cold"}
    assert (len(hot), len(cold)) == (200, 50)
    return hot, cold


def test_scan_pages_and_all(server: Server, client: redis.Redis) -> None:
    hot, cold = _hot_and_cold(client)
    code, out = run(server, "scan", "--count", "7", "--json")
    page = json.loads(out)
    assert code == 0 and page["cursor"] != 0, out
    assert 0 < len(page["memories"]) < 50 and {m["id"] for m in page["memories"]} <= hot
    # page by page, passing each cursor on, until it comes back to 0
    seen = [m["id"] for m in page["memories"]]
    pages = 1
    while page["cursor"] != 0:
        code, out = run(server, "scan", "--count", "7", "--cursor", str(page["cursor"]), "--json")
        assert code == 0, out
        page = json.loads(out)
        seen += [m["id"] for m in page["memories"]]
        pages += 1
    assert set(seen) == hot and pages > 2
    for tier, ids in (("hot", hot), ("cold", cold)):
        code, out = run(server, "scan", "--tier", tier, "--count", "7", "--all", "--json")
        page = json.loads(out)
        found = [m["id"] for m in page["memories"]]
        assert code == 0 and page["cursor"] == 0, out
        assert len(found) == len(ids) and set(found) == ids, tier
        assert {m["tier"] for m in page["memories"]} == {tier}
    code, out = run(server, "scan", "--tier", "cold", "--all", "--count", "13")
    *lines, summary = out.splitlines()
    assert code == 0 and sorted(line.split()[0] for line in lines) == sorted(cold), out
    assert summary == "50 memories; done"
    code, out = run(server, "scan", "--count", "7")
    assert code == 0 and re.fullmatch(
        r"\d+ memories; next page: --cursor \d+", out.splitlines()[-1]
    )
    code, out = run(server, "scan", "--count", "0")
    assert code != 0 and len(out.strip().splitlines()) == 1, out


def test_scan_all_lists_a_memory_returned_twice_once(
    server: Server, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HSCAN returns a memory again when the hash is resized during the scan;
    here each real page is returned with the page before it, as if it were."""
    hot, _ = _hot_and_cold(client)
    real_scan = MemoryStore.scan
    before: list[Memory] = []

    def scan_again(self: MemoryStore, *args: Any, **kwargs: Any) -> ScanPage:
        page = real_scan(self, *args, **kwargs)
        again = ScanPage(page.cursor, (*before, *page.memories))
        before[:] = page.memories
        return again

    monkeypatch.setattr(MemoryStore, "scan", scan_again)
    code, out = run(server, "scan", "--count", "7", "--all", "--json")
    found = [m["id"] for m in json.loads(out)["memories"]]
    assert code == 0 and len(found) == len(set(found)) == len(hot) and set(found) == hot, out


def test_drop_deletes_the_namespace(server: Server, client: redis.Redis) -> None:
    for id in ("a", "b"):
        assert run(server, "remember", id, "-i", "1", "--group", "g")[0] == 0
    client.set("memevict:{other}:policy", "not cli's")  # another namespace stays
    code, out = run(server, "drop", "--yes", "--json")
    assert code == 0 and json.loads(out)["namespace"] == "cli" and json.loads(out)["keys"] > 3
    # only the write calls' receipts are left, to expire on their own
    left = {k.decode() for k in client.keys("*")}
    assert left - {k for k in left if k.startswith("memevict:{cli}:call:")} == {
        "memevict:{other}:policy"
    }
    code, out = run(server, "stats")
    assert code == 1 and "namespace 'cli' does not exist" in out, out
    code, out = run(server, "drop", "--yes")
    assert code == 1 and "namespace 'cli' does not exist" in out, out


def test_drop_asks_first(server: Server, client: redis.Redis) -> None:
    assert run(server, "remember", "a", "-i", "1")[0] == 0
    args = ["--url", server.url, "--namespace", "cli", "drop"]
    refused = CliRunner().invoke(main, args, input="n\n")
    assert refused.exit_code == 1 and "Drop namespace 'cli': 1 hot and 0 cold" in refused.output
    assert run(server, "stats")[0] == 0  # still there
    # --json does not ask (it would wait for an answer): it refuses, in one line
    code, out = run(server, "drop", "--json")
    assert code == 1 and out.strip().splitlines() == [
        "Error: drop --json does not ask: pass --yes to drop 'cli'"
    ]
    assert run(server, "stats")[0] == 0
    done = CliRunner().invoke(main, args, input="y\n")
    assert done.exit_code == 0 and "dropped namespace 'cli'" in done.output, done.output
    assert run(server, "stats")[0] == 1


# --- issue 28: the operator's CLI, tried as a new user would ---------------------------------


def test_a_hand_broken_policy_field_is_one_line_and_heals(
    server: Server, client: redis.Redis
) -> None:
    """Item 11: stats and policy say what is wrong in one line, namespaces lists the
    namespace as unreadable and goes on, and the next writable open restores the field
    from the packed copy the scripts ran with."""
    assert run(server, "remember", "a", "-i", "1")[0] == 0
    other = CliRunner().invoke(
        main, ["--url", server.url, "-n", "fine", "remember", "b", "-i", "2"]
    )
    assert other.exit_code == 0
    client.hset("memevict:{cli}:policy", "max_hot", "banana")
    for command in (["stats"], ["policy"]):
        code, out = run(server, *command)
        assert code == 1 and "Traceback" not in out and out.count("\n") == 1, out
        assert "BadPolicy: the stored policy's max_hot is 'banana'" in out
    code, out = run(server, "namespaces")
    assert code == 0 and out.splitlines()[0].startswith("cli  cannot be read: BadPolicy")
    assert out.splitlines()[1].startswith("fine  hot=1"), out
    code, out = run(server, "namespaces", "--json")
    listed = {n["name"]: n for n in json.loads(out)}
    assert listed["cli"]["stats"] is None and "banana" in listed["cli"]["error"]
    assert listed["fine"]["error"] is None and listed["fine"]["stats"]["hot"] == 1
    code, out = run(server, "policy", "--max-hot", "5", "--json")
    assert code == 0 and json.loads(out)["max_hot"] == 5
    client.hset("memevict:{cli}:policy", "max_hot", "banana")
    assert run(server, "remember", "c", "-i", "1")[0] == 0  # restored from the packed copy
    assert client.hget("memevict:{cli}:policy", "max_hot") == b"5"


def test_a_refused_write_creates_no_namespace(server: Server, client: redis.Redis) -> None:
    """Item 12: arguments are checked before the store opens; a write that needs a memory
    (forget, touch, ...) on a namespace that does not exist says so and creates nothing."""
    for args in (
        ["remember", "x", "-i", "-1"],
        ["remember", "x", "-i", "1", "--tokens", "0"],
        ["policy", "--max-hot", "0"],
        ["forget", "x"],
        ["touch", "x"],
        ["recall", "x"],
        ["decay", "0.5"],
    ):
        result = CliRunner().invoke(main, ["--url", server.url, "-n", "typo", *args])
        assert result.exit_code == 1 and "Traceback" not in result.output, (args, result.output)
        assert not client.keys("memevict:{typo}:*"), args
    code, out = run(server, "namespaces")
    assert code == 0 and "typo" not in out


def test_the_cli_details_a_new_user_meets(server: Server, client: redis.Redis) -> None:
    """Item 13: --json before the command, REDIS_URL in --url's help, over and backlog in
    stats, get of no memory as JSON null, help for every policy option, and a server that
    needs a password said so."""
    assert run(server, "remember", "a", "-i", "1")[0] == 0
    code, out = run(server, "--json", "stats")  # (after --url and --namespace)
    assert code == 0 and json.loads(out)["backlog"] >= 0
    code, out = run(server, "stats")
    assert "over=0" in out and "backlog=" in out
    code, out = run(server, "get", "nothing", "--json")
    assert code == 0 and json.loads(out) is None
    assert run(server, "get", "nothing")[0] == 1
    assert "REDIS_URL" in CliRunner().invoke(main, ["--help"]).output
    help_text = CliRunner().invoke(main, ["policy", "--help"]).output.split("Options:")[1]
    for name in Policy.__dataclass_fields__:
        option = "--" + name.replace("_", "-")
        after = help_text.split(option, 1)[1].split("\n", 1)[0]
        assert re.search(r"[A-Z][a-z]", after), (option, after)  # a description on its line
    locked = Server(server.binary, extra=("--requirepass", "sekret")).start()
    try:
        result = CliRunner().invoke(main, ["--url", locked.url, "stats"])
        assert result.exit_code == 1 and "needs a password" in result.output, result.output
        assert "redis://:PASSWORD@" in result.output
    finally:
        locked.stop()
