"""The command line in production (issue 38): the embedded server after a killed command,
damaged namespaces, ACL users of a prefix, the scripts for other languages, and what the
CLI tells an operator about sessions and adapters."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio
from click.testing import CliRunner, Result

from memevict import AsyncMemoryStore, MemoryStore, PermissionDenied, Policy
from memevict.cli import main
from memevict.scripts import specs
from tests import docs
from tests.cluster import Cluster
from tests.servers import Server

MEMEVICT = [sys.executable, "-m", "memevict"]


def embedded_env(home: Path) -> dict[str, str]:
    """The environment of a command on the embedded server whose data is in ``home``."""
    env = {**os.environ, "MEMEVICT_HOME": str(home)}
    env.pop("REDIS_URL", None)
    return env


def embedded(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MEMEVICT, *args], env=embedded_env(home), capture_output=True, text=True, timeout=120
    )


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" in status.read_text()


def running_server(home: Path, command: subprocess.Popen[str] | subprocess.Popen[bytes]) -> int:
    """The pid of the embedded server ``command`` started, once it answers."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and command.poll() is None
        try:
            with redis.Redis(unix_socket_path=str(home / "valkey.sock")) as client:
                return int(client.info("server")["process_id"])
        except (redis.ConnectionError, FileNotFoundError):
            time.sleep(0.05)


# --- item 16: a killed command's embedded server --------------------------------------------


def test_a_command_after_a_killed_one_stops_the_server_it_left(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert embedded(home, "-n", "kept", "remember", "a", "-i", "3").returncode == 0
    command = subprocess.Popen(
        [*MEMEVICT, "simulate", "--turns", "5000"],
        env=embedded_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    left: int | None = None
    try:
        left = running_server(home, command)
        command.send_signal(signal.SIGKILL)  # mid-run: no finally block stops its server
        command.wait()
        assert not gone(left)  # what the issue saw: the server outlives its command
        after = embedded(home, "-n", "kept", "remember", "b", "-i", "2")
        assert after.returncode == 0 and "Traceback" not in after.stderr, after.stderr
        assert "stopped the embedded server a killed command left running" in after.stderr
        assert gone(left)
        stats = embedded(home, "-n", "kept", "stats", "--json")
        assert json.loads(stats.stdout)["hot"] == 2  # what came before the kill is there
    finally:
        if command.poll() is None:
            command.kill()
        if left is not None and not gone(left):
            os.kill(left, signal.SIGKILL)  # (unchanged code: the test's own leftover)


def test_a_terminated_command_stops_its_server_itself(tmp_path: Path) -> None:
    """SIGTERM (a timeout, a service stop) and SIGHUP end a command through its finally
    blocks: its server stops with it, and the next command finds nothing left over."""
    home = tmp_path / "home"
    for sig in (signal.SIGTERM, signal.SIGHUP):
        command = subprocess.Popen(
            [*MEMEVICT, "simulate", "--turns", "5000"],
            env=embedded_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        server = running_server(home, command)
        try:
            command.send_signal(sig)
            _, err = command.communicate(timeout=60)
            assert command.returncode == 128 + sig and "Traceback" not in err, err
            assert gone(server)
        finally:
            if not gone(server):
                os.kill(server, signal.SIGKILL)  # (unchanged code: the test's own leftover)
        after = embedded(home, "-n", "x", "stats")
        assert "left running" not in after.stderr, after.stderr


# --- item 20: the embedded server, said and async ----------------------------------------


def test_the_cli_says_on_stderr_when_it_runs_on_the_embedded_server(
    tmp_path: Path, server: Server
) -> None:
    home = tmp_path / "home"
    done = embedded(home, "-n", "x", "remember", "a", "-i", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert f"memevict: no --url or REDIS_URL: using the embedded server in {home}" in done.stderr
    assert json.loads(done.stdout)["id"] == "a"  # stdout: what the command prints, only
    given = subprocess.run(
        [*MEMEVICT, "--url", server.url, "-n", "x", "remember", "a", "-i", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert given.returncode == 0 and "embedded" not in given.stderr, given.stderr


def test_an_async_store_runs_on_the_embedded_server(tmp_path: Path) -> None:
    from memevict.embedded import async_embedded_client, embedded_client

    async def session() -> tuple[str | None, int]:
        async with async_embedded_client(tmp_path) as client:
            store = await AsyncMemoryStore(client, "openai:s1")
            await asyncio.gather(*(store.remember(f"m{i}", 1 + i, text=f"t{i}") for i in range(20)))
            memory = await store.get("m3")
            return memory.text if memory else None, (await store.stats()).hot

    assert asyncio.run(session()) == ("t3", 20)
    with embedded_client(tmp_path) as client:  # the same data, from the sync client
        memory = MemoryStore(client, "openai:s1", read_only=True).get("m19")
        assert memory is not None and memory.text == "t19"


def cli(server: Server | None, *args: str, input: str | None = None) -> Result:
    """A command run in-process (``server``: its --url), stdout and stderr apart."""
    url = ["--url", server.url] if server is not None else []
    return CliRunner().invoke(main, [*url, *args], input=input)


def test_namespaces_shows_tokens_and_takes_a_prefix(server: Server, client: redis.Redis) -> None:
    for name, tokens in (("openai:a", (3, 2)), ("openai:b", (7,)), ("langchain:c", (1,))):
        store = MemoryStore(client, name)
        for i, cost in enumerate(tokens):
            store.remember(f"m{i}", 1.0, tokens=cost)
    every = cli(server, "namespaces")
    assert every.exit_code == 0, every.output
    lines = every.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["langchain:c", "openai:a", "openai:b"]
    assert [line.split()[-1] for line in lines] == ["tokens=1", "tokens=5", "tokens=7"]
    some = cli(server, "namespaces", "--prefix", "openai:")
    assert [line.split()[0] for line in some.stdout.splitlines()] == ["openai:a", "openai:b"]
    listed = json.loads(cli(server, "namespaces", "--prefix", "openai:a", "--json").stdout)
    assert [(n["name"], n["stats"]["tokens"]) for n in listed] == [("openai:a", 5)]
    assert cli(server, "namespaces", "--prefix", "pydantic-ai:").stdout == "(none)\n"
    glob = cli(server, "namespaces", "--prefix", "open*")  # (a prefix is no pattern)
    assert glob.exit_code == 1 and "BadNamespace" in glob.output, glob.output


def adapters() -> set[str]:
    """The framework names the integrations pass to namespace_for."""
    import memevict.integrations

    return {
        name
        for path in Path(memevict.integrations.__file__).parent.glob("*.py")
        for name in re.findall(r'namespace_for\(\s*"([^"]+)"', path.read_text())
    }


@pytest.mark.parametrize("session_id", ["s1", "user 7 / chat {3}", "é" * 200, ""])
def test_namespace_of_is_the_adapters_namespace(session_id: str) -> None:
    from memevict.integrations._conversation import namespace_for

    for adapter in sorted(adapters()):
        done = cli(None, "namespace-of", "--adapter", adapter, session_id)
        assert done.exit_code == 0, done.output
        assert done.stdout == namespace_for(adapter, session_id) + "\n"
        shown = cli(None, "namespace-of", "--adapter", adapter, session_id, "--json")
        assert json.loads(shown.stdout)["namespace"] == namespace_for(adapter, session_id)
    unknown = cli(None, "namespace-of", "--adapter", "crewai", "s1")
    assert unknown.exit_code == 2 and "'openai'" in unknown.output


# --- item 17: a damaged namespace is dropped -------------------------------------------

# Damage a store cannot open through (a key of another type, a policy field no value of
# which is valid), and damage that hides the namespace from `namespaces` (no policy hash).
DAMAGE = {
    "hot-a-string": lambda c, k: (c.delete(k + "hot"), c.set(k + "hot", "x")),
    "state-a-string": lambda c, k: (c.delete(k + "state"), c.set(k + "state", "x")),
    "policy-field": lambda c, k: c.hset(k + "policy", "max_hot", "banana"),
    "policy-field-and-packed": lambda c, k: c.hset(
        k + "policy", mapping={"jitter": "a lot", "packed": b"\xc1"}
    ),
    "policy-a-string": lambda c, k: (c.delete(k + "policy"), c.set(k + "policy", "x")),
    "no-policy": lambda c, k: c.delete(k + "policy"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_drop_deletes_a_damaged_namespace(server: Server, client: redis.Redis, damage: str) -> None:
    for name in ("broken", "fine"):
        store = MemoryStore(client, name)
        store.remember_many([(f"m{i}", 1.0 + i) for i in range(5)])
        store.remember("g", 2.0, text="grouped", group="g1")
    DAMAGE[damage](client, "memevict:{broken}:")
    fine = {key: client.dump(key) for key in client.keys("memevict:{fine}:*")}
    listed = cli(server, "namespaces").stdout
    if damage.startswith("policy-a") or damage == "no-policy":
        assert "broken" not in listed  # (no policy hash: not listed, still droppable)
    else:
        assert "broken  cannot be read: " in listed, listed
    asked = cli(server, "-n", "broken", "drop", input="n\n")
    assert asked.exit_code == 1 and "Drop namespace 'broken'" in asked.output, asked.output
    assert client.keys("memevict:{broken}:*")  # refused: nothing deleted
    present = [k for k in client.keys("memevict:{broken}:*") if b":call:" not in k]
    done = cli(server, "-n", "broken", "drop", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["keys"] == len(present) >= 6
    left = [k for k in client.keys("memevict:{broken}:*") if b":call:" not in k]
    assert left == []  # (receipts expire on their own)
    assert {key: client.dump(key) for key in client.keys("memevict:{fine}:*")} == fine
    again = cli(server, "-n", "broken", "drop", "--yes")
    assert again.exit_code == 1 and "namespace 'broken' does not exist" in again.output
    assert cli(server, "-n", "broken", "remember", "a", "-i", "1").exit_code == 0  # anew


@pytest.mark.slow  # (a 3-master cluster)
def test_drop_and_the_listing_on_a_cluster(cluster: Cluster) -> None:
    """drop finds a damaged namespace's keys on the node of its slot, and namespaces
    --prefix asks every primary."""
    url = cluster.stable_url()
    client = cluster.client()
    try:
        client.flushall()
        names = [f"openai:s{i}" for i in range(12)]  # (on more than one node)
        for name in names:
            MemoryStore(client, name).remember("a", 1.0, tokens=2)
        DAMAGE["hot-a-string"](client, "memevict:{openai:s3}:")
        listed = CliRunner().invoke(main, ["--url", url, "namespaces", "--prefix", "openai:"])
        assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(names)
        assert "openai:s3  cannot be read: WrongType" in listed.stdout
        done = CliRunner().invoke(main, ["--url", url, "-n", "openai:s3", "drop", "--yes"])
        assert done.exit_code == 0, done.output
        assert not [k for k in client.keys("memevict:{openai:s3}:*") if b":call:" not in k]
        assert MemoryStore(client, "openai:s4", read_only=True).stats().tokens == 2
    finally:
        client.close()


def test_the_command_a_damaged_policy_error_suggests_repairs_it(
    server: Server, client: redis.Redis
) -> None:
    """A policy field edited by hand while the packed copy is damaged: `namespaces` lists
    the namespace with an error that suggests `memevict policy --jitter VALUE`, and that
    command, as suggested, sets the field and keeps the others (main: it failed as the
    listing did, BadPolicy)."""
    MemoryStore(client, "broken", Policy(max_hot=7)).remember("x", 1.0)
    DAMAGE["policy-field-and-packed"](client, "memevict:{broken}:")
    listed = cli(server, "namespaces").stdout
    suggested = re.search(r"\(memevict (policy --jitter) VALUE sets it\)", listed)
    assert suggested, listed
    done = cli(server, "-n", "broken", *suggested.group(1).split(), "0.002")
    assert done.exit_code == 0, done.output
    assert MemoryStore(client, "broken", read_only=True).policy == Policy(max_hot=7, jitter=0.002)
    assert "broken  hot=1" in cli(server, "namespaces").stdout
    client.hset("memevict:{broken}:policy", mapping={"jitter": "a lot", "max_hot": "x"})
    client.hset("memevict:{broken}:policy", "packed", b"\xc1")  # two fields broken
    twice = cli(server, "-n", "broken", "policy", "--jitter", "0.002")
    assert twice.exit_code == 1 and "BadPolicy" in twice.output  # (it says which, in turn)


# --- item 10: plain text in an adapter's namespace ---------------------------------------


@pytest.mark.parametrize("session_id", ["chat-7", "user 7 / chat {3}"])
def test_remember_warns_before_writing_text_into_an_adapters_namespace(
    server: Server, client: redis.Redis, session_id: str
) -> None:
    from memevict.integrations._conversation import namespace_for

    for adapter in sorted(adapters()):
        namespace = namespace_for(adapter, session_id)
        done = cli(server, "-n", namespace, "remember", "note", "-i", "5", "--text", "hi")
        assert done.exit_code == 0, done.output
        assert done.stdout.startswith("note score=")  # stdout: the command's own output
        warning = f"memevict: warning: {namespace!r} is a namespace of the {adapter} adapter"
        assert done.stderr.startswith(warning), done.stderr
        assert "leaves this plain text out of the prompt" in done.stderr
        again = cli(server, "-n", namespace, "remember", "note", "-i", "9")  # no text: none
        assert again.exit_code == 0 and again.stderr == "", again.stderr
    mine = cli(server, "-n", "agent-42", "remember", "note", "-i", "5", "--text", "hi")
    assert mine.exit_code == 0 and mine.stderr == ""


# --- item 18: an ACL user of every namespace with a prefix -------------------------------


def test_acl_prefix_user_runs_every_session_of_an_adapter_and_no_other(
    server: Server, client: redis.Redis
) -> None:
    from memevict.integrations.openai_agents import MemevictSession

    printed = cli(None, "acl", "sessions", "--prefix", "openai:", "--password", "pw", "--json")
    assert printed.exit_code == 0, printed.output
    shown = json.loads(printed.stdout)
    assert shown["prefix"] == "openai:" and shown["namespace"] is None
    assert "~memevict:{openai:*}:*" in shown["line"].split()
    MemoryStore(client, "langchain:z").remember("theirs", 5)
    before = {key: client.dump(key) for key in client.keys("*")}
    assert client.execute_command(*shown["line"].split()) in (b"OK", "OK", True)
    worker = server.client(username="sessions", password="pw")
    try:
        for name in ("openai:x", "openai:y"):
            store = MemoryStore(worker, name)
            store.remember("a", 3, text=f"in {name}")
            assert [m.text for m in store.window()] == [f"in {name}"]
            assert store.drop() > 0

        async def adapter_session(session_id: str) -> list[str]:
            shared = redis.asyncio.Redis(
                host="127.0.0.1", port=server.port, username="sessions", password="pw"
            )
            session = MemevictSession(session_id, client=shared)
            await session.add_items([{"role": "user", "content": f"hello from {session_id}"}])
            items = await session.get_items()
            await shared.aclose()
            return [str(item["content"]) for item in items]

        assert asyncio.run(adapter_session("x")) == ["hello from x"]
        assert asyncio.run(adapter_session("y")) == ["hello from y"]
        for other in ("langchain:z", "openai", "openaiz:1"):
            with pytest.raises(PermissionDenied):
                MemoryStore(worker, other).remember("mine", 1)
        spec = specs()["get"]  # a raw call with another namespace's keys
        with pytest.raises(redis.exceptions.NoPermissionError):
            worker.eval(spec.source, len(spec.keys), *spec.key_names("langchain:z"), "theirs", "")
        assert {key: client.dump(key) for key in client.keys("memevict:{langchain:*")} == before
    finally:
        worker.close()
        client.execute_command("ACL", "DELUSER", "sessions")


# --- item 19: the scripts from another language ------------------------------------------


def redis_cli() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        if os.environ.get("MEMEVICT_REQUIRE_REDIS") == "1":
            pytest.fail("redis-cli not found and MEMEVICT_REQUIRE_REDIS=1")
        pytest.skip("redis-cli not installed")
    return found


def test_scripts_out_writes_what_memevict_sends(tmp_path: Path) -> None:
    from memevict.functions import function_name, library

    done = cli(None, "scripts", "--out", str(tmp_path / "lua"))
    assert done.exit_code == 0, done.output
    written = {path.name: path.read_text(encoding="utf-8") for path in (tmp_path / "lua").iterdir()}
    assert written.pop("functions.lua") == library().source
    contract = json.loads(written.pop("scripts.json"))
    assert contract == json.loads(cli(None, "scripts", "--json").stdout)
    assert written == {f"{name}.lua": spec.source for name, spec in specs().items()}
    assert contract["library"]["name"] == library().name
    for row in contract["scripts"]:
        spec = specs()[row["name"]]
        assert (row["sha"], row["keys"], row["args"]) == (
            spec.sha,
            list(spec.keys),
            list(spec.args),
        )
        assert row["function"] == function_name(spec.name) and row["read_only"] == spec.read_only
    variadic = {r["name"]: r["per_item"] for r in contract["scripts"] if r["per_item"]}
    assert variadic == {"context": 1, "remember_many": 8}  # (skip ids; items)


def test_redis_cli_loads_the_exported_scripts_and_reads_what_python_reads(
    server: Server, client: redis.Redis, tmp_path: Path
) -> None:
    """The export block of docs/lua-contract.md, as written, by bash and redis-cli (no
    redis-py): FUNCTION LOAD and SCRIPT LOAD of the files, remember by FCALL and EVALSHA,
    the window by FCALL_RO; then the Python store reads the same memories."""
    from memevict.functions import library

    client.function_flush()  # (the block loads the library on a server without it)
    [block] = re.findall(r"```sh\n(memevict scripts --out .*?)```", docs.text(), re.S)
    script = block.replace("redis-cli ", f"{redis_cli()} -p {server.port} ")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euc", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    window = json.loads(done.stdout.splitlines()[-1])
    assert client.function_list(library=library().name)
    assert client.script_exists(specs()["remember"].sha) == [True]
    seen = MemoryStore(client, "agent-7", read_only=True).window()
    assert [(m.id, m.text, m.tokens, m.group) for m in seen] == [
        ("pw", "the password is swordfish", 1, None),
        ("deploy", "deploy from main only", 5, "ops"),
    ]
    assert window[1:3] == [seen.tokens, seen.left] == [6, 0]
    for raw, memory in zip(window[0], seen, strict=True):  # every field, in Memory's order
        id, importance, score, tier, whitelisted, *times, text, tokens, group = raw
        parsed = (id, float(importance), float(score), tier, bool(whitelisted), *times)
        assert (*parsed, text, tokens, group or None) == dataclasses.astuple(memory)
