"""The script registry: headers, NOSCRIPT recovery, one round trip per call, the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis
from redis.backoff import NoBackoff
from redis.connection import Connection
from redis.retry import Retry

from memevict import MemoryStore, NamespaceLost, Policy
from memevict.registry import Mode
from memevict.scripts import lua_root, specs
from tests.servers import Server

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000


def test_every_script_declares_what_it_uses() -> None:
    assert {p.stem for p in (ROOT / "lua").glob("*.lua")} == set(specs())
    for spec in specs().values():
        script_file = (ROOT / "lua" / f"{spec.name}.lua").read_text()
        code = "\n".join(line for line in script_file.splitlines() if not line.startswith("--"))
        assert set(re.findall(r"\bKEY\.(\w+)", code)) <= set(spec.keys), spec.name
        used_args = set(re.findall(r"\bARG\.(\w+)", code))
        assert used_args <= set(spec.args), spec.name
        # configure reads its policy fields as ARGV[i + 1], remember_many its items as ARGV[i]
        if spec.name != "configure":
            assert used_args == set(spec.args[:-1] if spec.group else spec.args), spec.name
        assert "redis.call" not in code  # scripts call through rcall from lib/args.lua
        assert spec.errors and spec.errors[0] == "ARITY", spec.name
        for code_name in spec.errors:
            assert f"'{code_name}'" in spec.source, (spec.name, code_name)


def test_no_key_name_is_built_inside_lua() -> None:
    for path in (ROOT / "lua").rglob("*.lua"):
        assert "memevict:" not in path.read_text(), path


def test_scripts_are_read_from_the_package() -> None:
    names = {entry.name for entry in lua_root().iterdir()}
    assert {f"{name}.lua" for name in specs()} <= names


class CountingConnection(Connection):
    commands: ClassVar[list[str]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.commands.append(str(args[0]))
        super().send_command(*args, **kwargs)


@pytest.mark.parametrize("mode", ["scripts", "functions"])
def test_every_method_is_one_round_trip(server: Server, mode: Mode) -> None:
    pool = redis.ConnectionPool(
        host="127.0.0.1", port=server.port, connection_class=CountingConnection
    )
    client = redis.Redis(connection_pool=pool)
    client.flushall()
    store = MemoryStore(client, "rt", Policy(max_hot=2, protect_s=0), mode=mode)
    store.registry.load()
    # Read-only scripts go out as EVALSHA_RO (FCALL_RO), so replicas and
    # read-only users serve them.
    write, read = ("EVALSHA", "EVALSHA_RO") if mode == "scripts" else ("FCALL", "FCALL_RO")
    calls: list[tuple[str, Callable[[], object]]] = [
        (write, lambda: store.remember("a", 1.0, text="x", now=T0)),
        (write, lambda: store.remember("b", 2.0, now=T0)),
        (write, lambda: store.remember("c", 3.0, whitelist=True, now=T0)),
        (write, lambda: store.remember_many([("d", 2.0), ("e", 3.0)], now=T0)),
        (write, lambda: store.touch("b", now=T0)),
        (write, lambda: store.decay(0.9)),
        (write, lambda: store.evict(now=T0)),
        (write, lambda: store.whitelist("b", now=T0)),
        (write, lambda: store.demote("b", now=T0)),
        (write, lambda: store.recall("a", now=T0)),
        (read, lambda: store.get("a", now=T0)),
        (read, lambda: store.top(5, now=T0)),
        (read, lambda: store.stats(now=T0)),
        (read, lambda: store.explain("a", 5, now=T0)),
        (write, lambda: store.forget("a")),
        (write, lambda: store.set_policy(Policy(max_hot=3, protect_s=0), now=T0)),
    ]
    for command, call in calls:
        CountingConnection.commands.clear()
        call()
        assert CountingConnection.commands == [command]
    client.close()


def test_calls_survive_script_flush(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(protect_s=0), mode="scripts")
    store.remember("a", 1.0, now=T0)
    client.script_flush()
    assert client.script_exists(specs()["remember"].sha) == [False]
    store.remember("b", 2.0, now=T0)
    assert client.script_exists(specs()["remember"].sha) == [True]
    assert [m.id for m in store.top(2, now=T0)] == ["b", "a"]


def test_a_flushall_is_a_lost_namespace_and_the_scripts_come_back(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=1, protect_s=0))
    client.flushall()
    client.script_flush()
    # The scripts come back on their own; the namespace, which this store wrote (its
    # policy), does not: it is lost, and recreate() starts it again (issue 29).
    with pytest.raises(NamespaceLost):
        store.remember("a", 1.0, now=T0)
    assert client.dbsize() == 0
    assert store.recreate() == Policy(max_hot=1, protect_s=0)
    r = store.remember("a", 1.0, now=T0)
    assert r.evicted == ()
    assert store.remember("b", 2.0, now=T0).evicted == ("a",)  # the store's policy came back


def test_load_returns_the_shas(client: redis.Redis) -> None:
    loaded = MemoryStore(client, "ns", mode="scripts").registry.load()
    assert loaded == {name: spec.sha for name, spec in specs().items()}
    assert all(client.script_exists(*loaded.values()))


@pytest.mark.slow
def test_the_wheel_contains_every_script(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("memevict-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (ROOT / "lua").rglob("*.lua"):
        assert f"memevict/lua/{path.relative_to(ROOT / 'lua')}" in names
    assert "memevict/py.typed" in names
    for package in ("memevict/bench", "memevict/simulate"):  # subpackages too
        assert f"{package}/__init__.py" in names


def test_a_restart_without_persistence_is_a_lost_namespace(server: Server) -> None:
    own = Server(server.binary).start()
    try:
        client = own.client(retry=Retry(NoBackoff(), 0))
        store = MemoryStore(client, "ns", Policy(max_hot=1, protect_s=0))
        store.remember("a", 1.0, now=T0)
        assert own.process is not None
        own.process.kill()
        own.process.wait()
        own.process = None
        with pytest.raises(redis.ConnectionError):
            store.stats()
        own.start()
        # no persistence: the scripts are loaded again, the namespace is lost
        with pytest.raises(NamespaceLost):
            store.remember("b", 2.0, now=T0)
        store.recreate()
        r = store.remember("b", 2.0, now=T0)
        assert r.evicted == ()
        assert store.remember("c", 3.0, now=T0).evicted == ("b",)
        client.close()
    finally:
        own.stop()
