"""The Lua scripts shipped in the package: read, headers parsed, helpers inlined.

Each ``lua/<name>.lua`` file is one atomic command. Its header is the single
source of truth for its contract: the ``-- KEYS[n] role: type, ...`` lines give
the key roles in order, the ``-- ARGV[n] name: ...`` lines the argument names
in order, and ``-- Errors:`` the codes it may raise. From the header the
loader generates the tables the script body uses (``KEY.role``, ``ARG.name``,
arity and key types), inlines ``--@include lib/x.lua`` lines once each, and
takes the SHA1 over the text actually sent to the server.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

if sys.version_info >= (3, 11):  # (re-exported: memevict.functions reads helpers too)
    from importlib.resources.abc import Traversable as Traversable
else:
    from importlib.abc import Traversable as Traversable

from redis.commands.core import AsyncScript, Script

from memevict.errors import BadArgument

KEY_PREFIX = "memevict"
_DECLARATION = re.compile(r"^-- (KEYS|ARGV)\[(\d+)\] (\w+): ?(\w*)")
_ERRORS = re.compile(r"^-- Errors: (.*)$")
# The last ARGV of a variadic script: "-- ARGV[n] items: 5 per item, repeated 1..100 times"
_GROUP = re.compile(r"^-- ARGV\[\d+\] \w+: (\d+) per item, repeated (\d+)\.\.")
_INCLUDE = re.compile(r"^--@include (\S+)\s*$")
# A command called from Lua: rcall('ZADD', ...), redis.call / redis.pcall, or
# typed_read('HGET', ...) (lib/args.lua) and each_chunk('HDEL', ...)
# (lib/memory.lua), the helpers that forward their first argument to the
# server. tests/test_security.py checks there is no other form.
_LUA_CALL = re.compile(
    r"""\b(?:rcall|redis\.p?call|typed_read|each_chunk)\(\s*['"]([A-Za-z]+)['"]"""
)
_KEY_TYPES = ("hash", "zset", "string", "stream")
# The names the preamble of every script assigns, in order.
PREAMBLE_NAMES = (
    "SCRIPT",
    "NKEYS",
    "NARGS",
    "GROUP",
    "GROUP_MIN",
    "KEY",
    "KEY_ROLE",
    "KEY_TYPE",
    "ARG",
    "COMMANDS",
)
# The receipt key of a write is <prefix>call:<call id> (lib/receipts.lua).
RECEIPT = "receipt"
CONFIGURE = "configure"

ArgValue = str | bytes
# A variadic script's last argument: its items' values, flattened.
Args = Mapping[str, ArgValue | Sequence[ArgValue]]


@dataclass(frozen=True, slots=True)
class ScriptSpec:
    """One script as it is sent to the server, with its parsed contract."""

    name: str
    source: str
    sha: str
    keys: tuple[str, ...]
    key_types: tuple[str, ...]
    args: tuple[str, ...]
    errors: tuple[str, ...]
    read_only: bool
    commands: tuple[str, ...]  # every command the script may call, lowercase
    group: int = 0  # > 0: the last ARGV repeats in groups of this many values
    # The parts source is made of, for the functions library: the header
    # tables as assignments (PREAMBLE_NAMES), the body without its
    # --@include lines, and the helper files it includes.
    preamble: tuple[str, ...] = ()
    body: str = ""
    includes: tuple[str, ...] = ()

    def key_names(self, namespace: str, call: str = "") -> list[str]:
        """The KEYS of this script for a namespace, in header order; a write
        script's receipt key names the call id (``""``: no receipt)."""
        return [key_name(namespace, f"call:{call}" if r == RECEIPT else r) for r in self.keys]

    def argv(self, values: Args) -> list[ArgValue]:
        """ARGV in header order from arguments given by name (a variadic
        script's last one as a flat sequence of its items' values)."""
        out: list[ArgValue] = []
        if len(values) == len(self.args):  # (then any name missing is one too many)
            for name in self.args:
                value = values.get(name)
                if isinstance(value, (str, bytes)):
                    out.append(value)
                elif value is None:
                    break
                elif self.group and name == self.args[-1]:
                    out.extend(value)
                else:
                    raise BadArgument(f"{self.name} argument {name} must be a str or bytes")
            else:
                return out
        raise BadArgument(f"{self.name} takes arguments {list(self.args)}, got {sorted(values)}")


def key_name(namespace: str, role: str) -> str:
    """The Redis key of one role; the {namespace} hash tag keeps a namespace in one slot."""
    return f"{KEY_PREFIX}:{{{namespace}}}:{role}"


def lua_root() -> Traversable:
    """The lua/ directory inside the installed package."""
    return files("memevict").joinpath("lua")


def _inline(text: str, root: Traversable, seen: set[str], stack: tuple[str, ...]) -> str:
    out: list[str] = []
    for line in text.splitlines():
        match = _INCLUDE.match(line)
        if match is None:
            out.append(line)
            continue
        path = match.group(1)
        if path in stack:
            raise RuntimeError(f"include cycle: {' -> '.join((*stack, path))}")
        if path in seen:
            continue
        seen.add(path)
        lib = root.joinpath(*path.split("/")).read_text(encoding="utf-8")
        out.append(f"-- {path}")
        out.append(_inline(lib, root, seen, (*stack, path)))
    return "\n".join(out)


def helpers_text(paths: Sequence[str], root: Traversable | None = None) -> str:
    """The helper files (``lib/x.lua``, under ``root``: the installed lua/ by
    default) inlined once each, in order, as --@include lines would inline them."""
    text = "\n".join(f"--@include {path}" for path in paths)
    return _inline(text, lua_root() if root is None else root, set(), ())


def _declarations(lines: Sequence[str], kind: str) -> list[tuple[str, str]]:
    found: dict[int, tuple[str, str]] = {}
    for line in lines:
        match = _DECLARATION.match(line)
        if match and match.group(1) == kind:
            found[int(match.group(2))] = (match.group(3), match.group(4))
    if sorted(found) != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{kind} in header are not numbered 1..n: {sorted(found)}")
    return [found[i] for i in sorted(found)]


def parse(
    name: str, text: str, root: Traversable, asked: Sequence[str] | None = None
) -> ScriptSpec:
    """Builds the script to send from its file text. ``asked``: the commands
    its check_acl asks the ACL for (default: its own if read-only, else none)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!lua"):
        raise RuntimeError(f"{name}.lua must start with a #!lua shebang line")
    header_end = 1
    while (
        header_end < len(lines)
        and lines[header_end].startswith("--")
        and not (_INCLUDE.match(lines[header_end]))
    ):
        header_end += 1
    header = lines[1:header_end]
    keys = _declarations(header, "KEYS")
    args = _declarations(header, "ARGV")
    for role, key_type in keys:
        if key_type not in _KEY_TYPES:
            raise RuntimeError(f"{name}.lua: KEYS role {role} has unknown type {key_type}")
    errors: tuple[str, ...] = ()
    for line in header:
        match = _ERRORS.match(line)
        if match:
            errors = tuple(code.strip() for code in match.group(1).split(","))
    group, group_min = next(
        ((int(m.group(1)), int(m.group(2))) for line in header if (m := _GROUP.match(line))), (0, 0)
    )
    # The tables the body reads, as assignments: local in a script, upvalues
    # of the library in functions mode (memevict/functions.py).
    preamble = [
        f"SCRIPT, NKEYS, NARGS, GROUP, GROUP_MIN = '{name}', {len(keys)}, {len(args)}, {group}, "
        f"{group_min}",
        "KEY = {" + ", ".join(f"{r} = KEYS[{i}]" for i, (r, _) in enumerate(keys, 1)) + "}",
        "KEY_ROLE = {" + ", ".join(f"'{r}'" for r, _ in keys) + "}",
        "KEY_TYPE = {" + ", ".join(f"'{t}'" for _, t in keys) + "}",
        "ARG = {" + ", ".join(f"{a} = ARGV[{i}]" for i, (a, _) in enumerate(args, 1)) + "}",
    ]
    body_lines = lines[header_end:]
    includes = tuple(m.group(1) for line in body_lines if (m := _INCLUDE.match(line)))
    body = _inline("\n".join(body_lines), root, set(), ())
    # The commands the body may call (helpers inlined whole, so a superset).
    commands = tuple(sorted({c.lower() for c in _LUA_CALL.findall(body)}))
    read_only = "no-writes" in lines[0]
    if asked is None:
        asked = commands if read_only else ()
    preamble.append("COMMANDS = {" + ", ".join(f"'{c}'" for c in asked) + "}")
    source = "\n".join([*lines[:header_end], *(f"local {a}" for a in preamble), body]) + "\n"
    return ScriptSpec(
        name=name,
        source=source,
        sha=hashlib.sha1(source.encode("utf-8")).hexdigest(),
        keys=tuple(r for r, _ in keys),
        key_types=tuple(t for _, t in keys),
        args=tuple(a for a, _ in args),
        errors=errors,
        read_only=read_only,
        commands=commands,
        group=group,
        preamble=tuple(preamble),
        body="\n".join(line for line in body_lines if not _INCLUDE.match(line)),
        includes=includes,
    )


@functools.cache
def specs() -> Mapping[str, ScriptSpec]:
    """Every script in the installed package, by name."""
    return specs_of(lua_root())


def specs_of(root: Traversable) -> Mapping[str, ScriptSpec]:
    """Every script of a lua/ directory, by name (an A/B builds one per tree)."""
    texts = {
        entry.name.removesuffix(".lua"): entry.read_text(encoding="utf-8")
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.is_file() and entry.name.endswith(".lua")
    }
    found = {name: parse(name, text, root) for name, text in texts.items()}
    # configure asks the ACL for every script's commands (lib/args.lua,
    # check_acl), so the write scripts on the hot path need not ask.
    every = sorted({c for spec in found.values() for c in spec.commands})
    found[CONFIGURE] = parse(CONFIGURE, texts[CONFIGURE], root, every)
    return found


def namespace_keys(namespace: str) -> list[str]:
    """Every fixed key of a namespace (the union of the scripts' KEYS), not
    the receipts, which come and go with the calls."""
    roles = {role for spec in specs().values() for role in spec.keys} - {RECEIPT}
    return [key_name(namespace, role) for role in sorted(roles)]


# Drop-in registration: the scripts on a client the caller owns.


@dataclass(frozen=True, slots=True)
class ScriptHandle:
    """One script registered on a caller's client as a redis-py ``Script``
    (EVALSHA, reloaded after NOSCRIPT, preloaded when a pipeline runs).

    ``handle(namespace, args)`` sends it with the namespace's KEYS and ``args``
    by ARGV name (the header's), on the registering client or on ``client``
    (another client, or a non-cluster pipeline, whose execute() returns the
    reply). The reply is raw; memevict.commands builds checked arguments and
    parses replies: ``c = commands.remember(...)``, then
    ``c.parse(handles.remember(ns, c.args, call=c.call))``.
    """

    spec: ScriptSpec
    script: Script | AsyncScript  # AsyncScript on an asyncio client: await the call

    def __call__(
        self, namespace: str, args: Args, *, call: str = "", client: Any | None = None
    ) -> Any:
        keys = self.spec.key_names(namespace, call)
        return self.script(keys=keys, args=self.spec.argv(args), client=client)


@dataclass(frozen=True, slots=True)
class Scripts:
    """Every script of the package, registered on one client (see register)."""

    configure: ScriptHandle
    context: ScriptHandle
    decay: ScriptHandle
    demote: ScriptHandle
    drop: ScriptHandle
    evict: ScriptHandle
    explain: ScriptHandle
    forget: ScriptHandle
    get: ScriptHandle
    recall: ScriptHandle
    remember: ScriptHandle
    remember_many: ScriptHandle
    scan: ScriptHandle
    search: ScriptHandle
    stats: ScriptHandle
    top: ScriptHandle
    touch: ScriptHandle
    whitelist: ScriptHandle
    window: ScriptHandle


def register(client: Any) -> Scripts:
    """The package's scripts as handles on ``client`` (a redis-py ``Redis`` or
    ``RedisCluster``, sync or asyncio); nothing is sent until a handle is called."""
    return Scripts(
        **{
            name: ScriptHandle(spec, client.register_script(spec.source))
            for name, spec in specs().items()
        }
    )
