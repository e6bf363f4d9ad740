"""Drop-in registration: the scripts on the caller's own client and pipelines,
and the header contract every script (and the functions library) keeps on
every server."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
import redis

from memevict import MemoryStore, Policy, commands
from memevict.functions import library
from memevict.scripts import Scripts, lua_root, register, specs

T0 = 1_700_000_000_000


def test_there_is_a_handle_for_every_script() -> None:
    assert {f.name for f in fields(Scripts)} == set(specs())


def test_handles_on_the_callers_client_and_pipeline(client: redis.Redis) -> None:
    handles = register(client)
    policy = Policy(max_hot=2, protect_s=0)
    configure = commands.configure(policy, replace=False)
    status, stored = configure.parse(handles.configure("ns", configure.args))
    assert (status, stored) == ("created", policy)  # the header: created | kept | replaced
    # A pipeline of the caller's, after SCRIPT FLUSH: redis-py loads the
    # scripts before it runs, and every reply parses as the store's would.
    client.script_flush()
    calls = [
        commands.remember(f"m{i}", 1.0 + i, text=None, whitelist=False, now=T0) for i in range(4)
    ]
    pipe = client.pipeline(transaction=True)
    for c in calls:
        handles.remember("ns", c.args, call=c.call, client=pipe)
    replies = [c.parse(raw) for c, raw in zip(calls, pipe.execute(), strict=True)]
    assert [r.evicted for r in replies] == [(), (), ("m0",), ("m1",)]
    top = commands.top(5, now=T0)
    assert [m.id for m in top.parse(handles.top("ns", top.args))] == ["m3", "m2"]
    # The store sees what the handles wrote.
    assert [m.id for m in MemoryStore(client, "ns").top(5, now=T0)] == ["m3", "m2"]


def test_handles_check_argument_names(client: redis.Redis) -> None:
    handles = register(client)
    with pytest.raises(commands.BadArgument, match="takes arguments"):
        handles.stats("ns", {"when": ""})


def test_every_header_declares_exactly_what_the_script_uses() -> None:
    """KEYS and ARGV reach a script body only through the KEY/ARG tables the
    loader builds from its header; the body uses only declared keys, every
    declared key is used, and the arguments used are exactly those declared."""
    libs = {p.name: p.read_text() for p in lua_root().joinpath("lib").iterdir()}
    for name, spec in specs().items():
        text = lua_root().joinpath(f"{name}.lua").read_text()
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        included = re.findall(r"^--@include lib/(\S+)", text, re.M)
        code = body + "\n".join(libs[lib] for lib in included)
        # configure reads its policy fields as ARGV[i + 1] in a loop; a variadic script
        # (remember_many's items, context's skip) its last argument's values
        positional = {"configure": set(spec.args[1:-1])}
        if spec.group:
            positional[name] = {spec.args[-1]}
        direct = r"\bKEYS\[" if name in positional else r"\b(KEYS|ARGV)\["
        assert not re.search(direct, body), f"{name} reads KEYS or ARGV directly"
        # A helper file serves several scripts, so it may name keys a given
        # script lacks (and never calls that helper): the body's keys must be
        # declared, and every declared key used by the body or its helpers.
        in_body = set(re.findall(r"\bKEY\.(\w+)", body))
        assert in_body <= set(spec.keys) <= set(re.findall(r"\bKEY\.(\w+)", code)), name
        used_args = set(re.findall(r"\bARG\.(\w+)", body))
        assert used_args | positional.get(name, set()) == set(spec.args), name


def test_every_script_and_the_library_load(client: redis.Redis) -> None:
    for name, spec in specs().items():
        assert client.script_load(spec.source) == spec.sha, name
    assert client.function_load(library().source, replace=True) == library().name.encode()
