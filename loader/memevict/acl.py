"""The least-privilege Redis ACL of one namespace, derived from the Lua sources.

A user with these rules can run every memevict script on its own namespace and
nothing else: no other key, no channel, no command the scripts do not call.
The commands are read from the scripts as they are sent to the server (their
``rcall('CMD'`` lines, helpers inlined), so a new command in a script is in the
rules without anyone editing a list; to them come the few the store sends
itself. Redis checks the user's ACL on every command a script calls and on
every key passed in KEYS.
"""

from __future__ import annotations

import re

from memevict.commands import check_namespace
from memevict.errors import BadArgument
from memevict.scripts import key_name, specs

# What the store itself sends: EVALSHA (EVALSHA_RO for read-only scripts), EVAL
# and EVAL_RO after NOSCRIPT, SCRIPT LOAD in ScriptRegistry.load, HMGET of the
# policy in a read-only store; EXISTS of the namespace's keys when a call finds
# no policy (is it lost, or damaged?); SCRIPT EXISTS, for an operator
# checking a preload; FCALL / FCALL_RO in functions mode; and HGETALL of the state,
# the namespace's version (a call of no script, so that INFO commandstats tells it
# apart from the scripts' own HMGETs). Not WAIT and
# WAITAOF, which a durable store sends after each write: a user of one adds
# +wait (and +waitaof, which Redis 7.0 does not know) to these rules; refused,
# the write is applied and the call raises NotDurable. Not FUNCTION LOAD: a
# library is shared by every user of the server, so a user allowed to replace
# it could run code of its own as the users of other namespaces. An admin
# loads it (`memevict load --functions`); a store that finds it missing then
# fails with PermissionDenied.
LOADER_COMMANDS = (
    "evalsha",
    "evalsha_ro",
    "eval",
    "eval_ro",
    "script|load",
    "script|exists",
    "hmget",
    "exists",
    "fcall",
    "fcall_ro",
    "hgetall",
    "xrange",
    "xrevrange",
)

# Characters redis-cli reads literally in an unquoted argument.
_CLI_PLAIN = re.compile(r"[!#-&(-\[\]-~]+")


def script_commands() -> tuple[str, ...]:
    """The commands the scripts call, lowercased and sorted."""
    return tuple(sorted({c for spec in specs().values() for c in spec.commands}))


def commands() -> tuple[str, ...]:
    """Every command a memevict user needs: the loader's, then the scripts' others."""
    return (*LOADER_COMMANDS, *(c for c in script_commands() if c not in LOADER_COMMANDS))


def key_pattern(namespace: str, *, prefix: bool = False) -> str:
    """The ACL key pattern of one namespace, ``~memevict:{namespace}:*``; with ``prefix``,
    of every namespace that starts with ``namespace``, ``~memevict:{openai:*}:*`` (an
    adapter's sessions, one namespace each).

    check_namespace refuses glob characters and braces, so the pattern matches these
    namespaces' keys only: the ``*`` inside the braces cannot reach past them.
    """
    if prefix and not namespace:
        raise BadArgument("an empty prefix would be every namespace: give one, such as openai:")
    return "~" + key_name(check_namespace(namespace) + ("*" if prefix else ""), "*")


def acl_rules(namespace: str, *, prefix: bool = False) -> list[str]:
    """ACL SETUSER rules granting exactly what memevict needs on one namespace (with
    ``prefix``: on every namespace that starts with ``namespace``)."""
    pattern = key_pattern(namespace, prefix=prefix)
    return ["resetkeys", pattern, "resetchannels", "-@all", *(f"+{c}" for c in commands())]


def _cli_arg(arg: str) -> str:
    # redis-cli splits on whitespace and reads quotes anywhere in an argument;
    # anything but plain printable ASCII goes in double quotes, byte by byte.
    if _CLI_PLAIN.fullmatch(arg):
        return arg
    escaped = "".join(
        chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\x{b:02x}"
        for b in arg.encode("utf-8")
    )
    return f'"{escaped}"'


def acl_setuser_line(user: str, namespace: str, password: str, *, prefix: bool = False) -> str:
    """The ``ACL SETUSER`` line to paste into redis-cli: it creates the user, or
    resets an existing one, with only the rules of :func:`acl_rules`."""
    if not user or any(c.isspace() or c == "\0" for c in user):
        raise BadArgument(f"user must be non-empty, without spaces or NUL: {user!r}")
    if not password:
        raise BadArgument("password must not be empty")
    rules = acl_rules(namespace, prefix=prefix)
    args = ["ACL", "SETUSER", user, "reset", "on", f">{password}", *rules]
    return " ".join(_cli_arg(a) for a in args)
