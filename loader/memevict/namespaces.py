"""Every memevict namespace on a server, with its counts; and dropping one, whatever
state it is in.

A namespace exists while its policy key does (``memevict:{<namespace>}:policy``,
scripts.key_name), so the namespaces are found by SCAN over that pattern: on a
cluster client SCAN goes to every primary. Each one's counts come from a
read-only store (a policy read and the read-only stats script), so listing
creates and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from redis.exceptions import ResponseError

from memevict.commands import as_text, check_namespace
from memevict.errors import BadNamespace, MemevictError, NoPolicy, from_response
from memevict.registry import ScriptRegistry, SyncClient
from memevict.results import Stats
from memevict.scripts import key_name, specs
from memevict.store import MemoryStore

# memevict:{*}:policy; the namespace is what the * matched.
POLICY_PATTERN = key_name("*", "policy")
_HEAD, _TAIL = POLICY_PATTERN.split("*")
SCAN_COUNT = 1000  # keys a SCAN step looks at; the policy keys are few among them


@dataclass(frozen=True, slots=True)
class Namespace:
    """One namespace and its counts (as its store's ``stats()``); for one whose counts
    cannot be read (a key edited by hand, an ACL that refuses them), None and why."""

    name: str
    stats: Stats | None
    error: str | None = None


def unreadable(name: str, error: MemevictError, packed: bool) -> Namespace | None:
    """The entry of a namespace whose counts could not be read: None if it has no whole
    policy (deleted since the SCAN, or a hash that only looks like one; ``packed``:
    whether its policy has the packed copy configure writes), else listed with the error,
    so that one damaged namespace does not fail the list."""
    if isinstance(error, NoPolicy) and not packed:
        return None
    return Namespace(name, None, f"{type(error).__name__}: {error}")


def names_of(keys: Iterable[bytes | str]) -> list[str]:
    """The namespaces of policy keys found by SCAN, sorted, each once (a key
    seen twice while a cluster slot migrates counts once); a key that only
    looks like a policy key (a namespace memevict would refuse) is left out."""
    found: set[str] = set()
    for key in keys:
        text = as_text(key)
        if not (text.startswith(_HEAD) and text.endswith(_TAIL)):
            continue
        try:
            found.add(check_namespace(text[len(_HEAD) : -len(_TAIL)]))
        except BadNamespace:
            continue
    return sorted(found)


def policy_pattern(prefix: str = "") -> str:
    """The SCAN pattern of the policy keys of the namespaces that start with ``prefix``
    (every namespace for ""). A prefix is checked as a namespace is, so it holds no glob
    character: the pattern matches exactly those namespaces' keys."""
    return key_name(f"{check_namespace(prefix) if prefix else ''}*", "policy")


def namespaces(client: SyncClient, *, now: int | None = None, prefix: str = "") -> list[Namespace]:
    """Every namespace on the server of ``client`` (a ``redis.Redis`` or a
    ``RedisCluster``, every primary), sorted by name, with its counts at
    ``now`` (default: the server clock); only those that start with ``prefix``
    if given (``"openai:"``: every session of the OpenAI adapter). Writes
    nothing; a namespace deleted while the list is made is left out."""
    keys = client.scan_iter(match=policy_pattern(prefix), count=SCAN_COUNT, _type="hash")
    found: list[Namespace] = []
    for name in names_of(keys):
        try:
            stats = MemoryStore(client, name, read_only=True).stats(now=now)
        except MemevictError as error:
            entry = unreadable(
                name, error, bool(client.hexists(key_name(name, "policy"), "packed"))
            )
            found += [entry] if entry else []
            continue
        found.append(Namespace(name, stats))
    return found


def drop_namespace(client: SyncClient, namespace: str) -> int:
    """Deletes every key of a namespace (the drop script: one atomic UNLINK) whatever
    state it is in: a key of the wrong type, its policy missing or damaged past
    reading, half written. What ``store.drop()`` does, without a store, so without
    configuring the namespace first; returns the number of keys deleted (0: none
    was there). Its receipts expire on their own (``retry_window_s``)."""
    spec = specs()["drop"]
    registry = ScriptRegistry(client, "auto")
    registry.ensure_library(key_name(check_namespace(namespace), "policy"))
    try:
        return int(registry.run(spec, spec.key_names(namespace), []))
    except ResponseError as error:
        raise from_response(error) from None
