"""MemoryStore: the typed Python face of the Lua scripts, one script call per method.

:class:`StoreBase` holds what the sync store and the async one
(memevict/aio.py) share besides memevict/commands.py: the namespace, each
script's keys, and the policy checks. The stores differ only in ``await``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from redis.exceptions import RedisError, ResponseError

from memevict import commands
from memevict.clientcache import cache_of
from memevict.clients import client_from_url, close_client
from memevict.commands import ASK_SEEN, POLICY_FIELDS, Call, Configured, Item
from memevict.errors import (
    BadArgument,
    BadPolicy,
    NamespaceChanged,
    NamespaceLost,
    NoPolicy,
    NotDurable,
    PolicyMismatch,
    ReadOnly,
    UnsafeMaxmemoryPolicy,
    WrongType,
    from_response,
)
from memevict.log import evictions_of, read_command
from memevict.policy import Policy, mismatch
from memevict.registry import (
    MIGRATION_WAIT_S,
    Choice,
    Durability,
    Mode,
    RegistryBase,
    ScriptRegistry,
    SyncClient,
    check_mode,
)
from memevict.results import (
    Batch,
    Context,
    Evicted,
    Eviction,
    Explanation,
    Match,
    Memory,
    Remembered,
    ScanPage,
    Stats,
    Tier,
    Version,
    Window,
)
from memevict.scripts import (
    CONFIGURE,
    RECEIPT,
    ArgValue,
    ScriptSpec,
    key_name,
    namespace_keys,
    specs,
)
from memevict.state import version_of

T = TypeVar("T")
S = TypeVar("S", bound="MemoryStore")

# How many times a call is sent at most: again after healing the namespace, starting
# it again, or taking another policy (each found by the call before: NO_POLICY,
# NAMESPACE_CHANGED), so a namespace that keeps changing under it fails the call.
SENDS = 4


def incarnation(seen: str) -> str:
    """The namespace's incarnation in a seen value ('<incarnation>:<revision>')."""
    return seen.partition(":")[0]


__all__ = ["MemoryStore", "ScriptRegistry", "StoreBase"]


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def _application_frame() -> tuple[str, int, dict[str, Any]]:
    """File, line and module globals of the innermost caller outside memevict (an
    adapter's store is made inside memevict: the application's line that made the
    adapter)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals


class StoreBase:
    """One namespace's script calls, before anything is sent."""

    def __init__(self, namespace: str, mode: str, read_only: bool, cached_open: bool) -> None:
        self._made_at = _application_frame()
        self.cached_open = cached_open
        self.namespace = commands.check_namespace(namespace)
        self.mode_asked: Choice = check_mode(mode)
        self.read_only = read_only
        self._specs = specs()
        # Encoded once: redis-py sends bytes as they are (a str costs it an encode per call).
        self._keys = {
            name: [key.encode() for key in spec.key_names(namespace)]
            for name, spec in self._specs.items()
        }
        self._receipt_at = {
            name: spec.keys.index(RECEIPT)
            for name, spec in self._specs.items()
            if RECEIPT in spec.keys
        }
        self.policy_key = key_name(namespace, "policy")
        self.state_key = key_name(namespace, "state")
        self.log_key = key_name(namespace, "log")
        self.adopt_policy = False
        # When this store last wrote to its namespace (time.monotonic()), or None: it has
        # not (or dropped it). See _lost.
        self._wrote_at: float | None = None
        # The namespace as this store last saw it, '<incarnation>:<revision>', as every
        # configure the store sends tells it (lua/configure.lua): every write carries it
        # (ARGV seen, at _seen_at) and is refused, before it writes, by a namespace made
        # again since or whose policy changed; "" unknown (after a drop): the next write
        # configures first. _acked: a write of this store was applied to that
        # incarnation, so its being made again by another is a loss (_made_again).
        self._seen = ""
        self._acked = False
        self._seen_at = {
            name: spec.args.index("seen")
            for name, spec in self._specs.items()
            if "seen" in spec.args
        }
        self._data_keys = namespace_keys(namespace)
        # True when the store made its client (from_url): closing the store closes it.
        self.owns_client = False

    registry: RegistryBase[Any]
    client: Any

    @property
    def mode(self) -> Mode:
        """How this store calls the scripts: "functions" (FCALL) or "scripts"
        (EVALSHA); with mode="auto", what the server and the ACL allowed."""
        return self.registry.mode

    def _parts(
        self, call: Call[Any], seen: str | None = None
    ) -> tuple[ScriptSpec, list[bytes], list[ArgValue]]:
        """The script, KEYS and ARGV of a call, its ARGV seen this store's (``seen``: another,
        for a configure of the store's own); ReadOnly, before anything is sent, for a
        write of a read-only store (a replica would refuse it; a primary must not see it)."""
        spec = self._specs[call.script]
        if self.read_only and not spec.read_only:
            raise ReadOnly(
                f"{call.script} writes, and this store of {self.namespace!r} is read-only "
                "(read_only=True): open one without read_only, on the primary, to write"
            )
        keys = self._keys[call.script]
        if call.call:  # the receipt key is <prefix>call:<call id>
            keys = list(keys)
            keys[self._receipt_at[call.script]] += call.call.encode()
        argv = spec.argv(call.args)
        at = self._seen_at.get(call.script)
        if at is not None:
            argv[at] = self._seen if seen is None else seen
            if not argv[at] and call.script == CONFIGURE:  # (its reply tells the seen)
                argv[at] = ASK_SEEN
        return spec, keys, argv

    def _opened_before(self, policy: Policy | None, replace: bool) -> Policy | None:
        """The policy in force as a store opened before this one on the same client
        last found it, its seen taken, when this store may open on that instead of
        configuring (memevict/clientcache.py: a session object made per request): it
        writes, is not durable (whose configure waits for the replicas) and does not
        replace the policy, and it asks for none, for that one, or adopts the stored
        one. None: configure (which also tells PolicyMismatch)."""
        if not self.cached_open or self.read_only or replace or self.registry.durable:
            return None
        known = cache_of(self.client).namespace(self.namespace)
        if known is None:
            return None
        seen, stored = known
        if policy is not None and policy != stored and not self.adopt_policy:
            return None
        self._seen = seen
        return stored

    def _maxmemory_policy(self) -> Any:
        """The reply to CONFIG GET maxmemory-policy that a store before this one on the
        client had (cached_open; {} if refused), {} for a store that does not ask
        (_asks_config), or None: ask."""
        if not self._asks_config(self.client):
            return {}
        return cache_of(self.client).maxmemory if self.cached_open else None

    @staticmethod
    def _terms(terms: Sequence[str] | None, policy: Policy | None) -> Sequence[str] | None:
        """A memory's terms as sent: none made from its text for a namespace that keeps
        no index (the script would ignore them); None (made) while the policy is unknown."""
        if terms is None and policy is not None and not policy.index:
            return ()
        return terms

    @staticmethod
    def _indexed(
        items: Sequence[Item | tuple[str, float]], policy: Policy | None
    ) -> Sequence[Item | tuple[str, float]]:
        """remember_many's items, their terms as _terms sends them."""
        if policy is None or policy.index or isinstance(items, str | bytes):
            return items
        return [
            dataclasses.replace(i, terms=()) if isinstance(i, Item) and i.terms is None else i
            for i in items
        ]

    def _configure_call(self, policy: Policy | None, replace: bool) -> Call[Configured]:
        return commands.configured(policy if policy is not None else Policy(), replace=replace)

    @staticmethod
    def _asks_config(client: Any) -> bool:
        """CONFIG is an admin command: a store connected as a named ACL user
        (a least-privilege worker) does not ask, so it never meets a refusal."""
        pool = getattr(client, "connection_pool", None)
        return not getattr(pool, "connection_kwargs", {}).get("username")

    def _warn_if_keys_can_be_evicted(self, config: Any, policy: Policy) -> None:
        """Warns when the server's maxmemory-policy may evict memevict's keys one by one
        (docs/operations.md: Lost keys): any key (allkeys-*), or any key with a TTL
        (volatile-*) in a namespace whose idle_ttl_s gives every key one. ``config`` is the reply to
        CONFIG GET maxmemory-policy."""
        values = config.values() if isinstance(config, dict) else ()
        for value in values:
            name = commands.as_text(value)
            if name.startswith("allkeys-"):
                why = "evicts memevict's keys one by one; use noeviction or a volatile-* policy"
            elif name.startswith("volatile-") and policy.idle_ttl_s > 0:
                why = (
                    f"evicts keys with a TTL, and idle_ttl_s={policy.idle_ttl_s:g} gives every "
                    "key of this namespace one: its keys go one by one; use noeviction, or "
                    "idle_ttl_s=0 under a volatile-* policy"
                )
            else:
                continue
            # At the line that made the store (an async store warns at its first call,
            # from a task whose stack holds no line of the caller's).
            filename, lineno, where = self._made_at
            warnings.warn_explicit(
                f"the server's maxmemory-policy is {name}: at maxmemory it {why}",
                UnsafeMaxmemoryPolicy,
                filename,
                lineno,
                module=str(where.get("__name__", "")),
                registry=where.setdefault("__warningregistry__", {}),  # (once a line, as warn)
            )
            return

    def _set_policy_call(
        self, policy: Policy | None, changes: dict[str, Any], now: int | None
    ) -> Call[Configured]:
        """A whole new policy, or changes to some fields of the stored one."""
        if changes:
            if policy is not None:
                raise BadArgument("set_policy takes a Policy or fields to change, not both")
            return commands.update_policy(changes, now=now)
        if policy is None:  # None means "the stored one" only to the constructor
            raise BadPolicy("set_policy needs a Policy, got None")
        return commands.configured(policy, replace=True, now=now)

    def _configured(self, done: Configured) -> Policy:
        """Takes what a configure of this store told (its reply): the namespace's seen
        (another incarnation: this store has written nothing there yet); returns the
        policy in force. (A configure is a write: it keeps the namespace alive.)"""
        self._wrote_at = time.monotonic()
        if incarnation(done.seen) != incarnation(self._seen):
            self._acked = False
        self._seen = done.seen
        cache_of(self.client).took(self.namespace, done.seen, done.policy)
        return done.policy

    def _not_confirmed(self, error: NotDurable) -> NotDurable:
        """A configure applied but not confirmed, taken as done: the error, its result
        the policy."""
        error.result = self._configured(cast(Configured, error.result))
        return error

    def _first_pending(self, call: Call[Any]) -> str | None:
        """What a call's first send needs first: a write of a store that does not know
        its namespace's seen (after a drop) configures it ("": see _after)."""
        if self._seen or self.read_only or self._specs[call.script].read_only:
            return None
        return ""

    def _after(self, error: NoPolicy | NamespaceChanged, sends: int, policy: Policy) -> str:
        """What a store does before it sends again a call refused by ``error``, its
        ``sends``-th send (scripts refuse before any write, so nothing ran): take the
        namespace as the returned seen says it is now (_take; "": heal it, or start it
        again). Raises what the call raises instead: NamespaceLost (_made_again), or the
        error itself after SENDS sends, or NoPolicy to a read-only store."""
        if isinstance(error, NamespaceChanged):
            lost = self._made_again(error, policy)
            if lost is not None:
                raise lost from None
        elif self.read_only:
            raise error
        if sends == SENDS:
            raise error
        return error.seen if isinstance(error, NamespaceChanged) else ""

    def _wrote(self, call: Call[Any]) -> None:
        """Notes a call that reached the namespace (a write keeps it alive; a write of
        memories under a known seen makes the namespace's loss this store's)."""
        if not self._specs[call.script].read_only:
            self._wrote_at = time.monotonic()
            if call.script != CONFIGURE and self._seen:
                self._acked = True

    def _dropped(self) -> None:
        """After this store's drop (applied, confirmed or not): as a store that never
        wrote to the namespace, which its next write starts again."""
        self._wrote_at, self._seen, self._acked = None, "", False
        cache_of(self.client).forget(self.namespace)

    def _may_have_expired(self, policy: Policy) -> bool:
        """Whether the namespace may have expired by idle_ttl_s (``policy``: the store's,
        as of its last write; a changed one is picked up by the write after the change)
        since this store last wrote to it."""
        idle, at = policy.idle_ttl_s, self._wrote_at
        return idle > 0 and at is not None and time.monotonic() - at >= idle

    def _lost(self, keys_left: int, policy: Policy) -> NamespaceLost | None:
        """What a call that found no policy raises instead of configuring the namespace
        again: NamespaceLost when this store had written to it (or opened it), none of
        its keys is left (``keys_left``: EXISTS of namespace_keys; a damaged namespace,
        its policy or state key deleted alone, heals by configuring) and it could not
        have expired by idle_ttl_s since (then it was lost under this store: issue 29).
        None when this store never wrote to it, or it may have expired by design."""
        if self._wrote_at is None or keys_left > 0 or self._may_have_expired(policy):
            return None
        return NamespaceLost(
            f"namespace {self.namespace!r} is gone from the server (FLUSHDB, a drop by "
            "another store, a restart without persistence or a failover to a server "
            "without it); nothing was written there. store.recreate() starts it again, empty"
        )

    def _made_again(self, changed: NamespaceChanged, policy: Policy) -> NamespaceLost | None:
        """What a call refused by another namespace than the one this store saw raises:
        NamespaceLost when it is another incarnation (the one this store wrote to was
        lost, and another store made it again since: a restarted worker, the CLI, a
        per-request from_url; issue 38), this store had written memories to the one it
        saw and that could not have expired by idle_ttl_s since. None to take the one
        there and send the call again: only its policy changed, or this store has
        nothing there to lose."""
        if incarnation(changed.seen) == incarnation(self._seen):
            return None
        if not self._acked or self._may_have_expired(policy):
            return None
        return NamespaceLost(
            f"namespace {self.namespace!r} was lost since this store wrote to it (FLUSHDB, "
            "a drop by another store, a restart without persistence or a failover) and "
            "made again by another store: what this store wrote is not there, and nothing "
            "was written. store.recreate() writes to the new one from now on"
        )

    def _checked(self, policy: Policy | None, stored: Policy) -> Policy:
        """The stored policy, which must be ``policy`` when one was asked for
        (unless the store adopts a stored policy)."""
        if policy is not None and stored != policy and not self.adopt_policy:
            raise PolicyMismatch(mismatch(self.namespace, stored, policy))
        return stored

    def _parse_stored_policy(self, values: Sequence[Any]) -> Policy:
        """The policy from an HMGET of POLICY_FIELDS on the policy key."""
        stored = {
            n: commands.as_text(v)
            for n, v in zip(POLICY_FIELDS, values, strict=True)
            if v is not None
        }
        if stored:  # (a policy stored before these fields were added: their defaults)
            stored = {**FIELDS_ADDED_SINCE_0_1_0, **stored}
        if len(stored) != len(POLICY_FIELDS):
            raise NoPolicy(
                f"namespace {self.namespace!r} does not exist (it has no policy); a store "
                "that may write creates it (memevict policy --max-hot N, or remember)"
            )
        return Policy.from_strings(stored)


# The policy fields added after memevict 0.1.0, and the value a policy stored without them
# reads (the fifth entry of their line in lua/lib/policy.lua's POLICY: a test checks).
FIELDS_ADDED_SINCE_0_1_0 = {
    "max_tokens": "0",
    "idle_ttl_s": "0",
    "index": "0",
    "protect_memories": "0",
    "log_max": "0",
}


class MemoryStore(StoreBase):
    """One namespace of memories in Redis (a ``redis.Redis`` or a ``RedisCluster``).

    The namespace's policy is stored in Redis so every worker sharing it uses
    the same parameters. Without ``policy`` the store uses the stored one (the
    defaults if the namespace is new). With a ``policy`` that differs from the
    stored one it raises :class:`PolicyMismatch`, unless ``replace_policy``.

    With ``read_only=True`` (a client of a read replica) the store writes
    nothing: it reads the stored policy instead of configuring, the reads work,
    and every write raises :class:`ReadOnly` before anything is sent (on a
    primary too).

    ``mode="auto"`` (the default) calls the scripts as the Redis Functions
    library ``memevict_<version>`` (FCALL), loading it if the server lacks it, where the
    server and the ACL allow, else as scripts (EVALSHA); ``self.mode`` says
    which. ``mode="functions"`` or ``"scripts"`` asks for one (no fallback).

    On a cluster, a call refused because the namespace's slot is being
    migrated (TRYAGAIN) is sent again for up to ``migration_wait_s`` seconds
    before :class:`SlotMigrating`; the nodes refuse it before it runs. An
    FCALL whose node is lost (a failover) is sent again to the slot's new
    owner for as long (then the connection error).

    Opening sends up to three commands (the library's version, a configure,
    CONFIG GET). With ``cached_open=True`` (what the adapters' session objects
    use) a store opened on a client on which a store of the same namespace
    opened before takes what that one found instead, and sends nothing: the
    way to make a store per request cheap. What went stale since is caught by
    the first write (a namespace lost, made again or whose policy changed
    refuses it before it writes; the store takes it as it is and sends the
    write again) and a missing library by the first call; until its first
    write, ``policy`` is the policy as a store on this client last saw it.
    """

    registry: ScriptRegistry

    def __init__(
        self,
        client: SyncClient,
        namespace: str = "default",
        policy: Policy | None = None,
        *,
        replace_policy: bool = False,
        adopt_policy: bool = False,
        read_only: bool = False,
        mode: Choice = "auto",
        migration_wait_s: float = MIGRATION_WAIT_S,
        durable_replicas: int = 0,
        durable_timeout_ms: int = 1000,
        durable_aof: bool = False,
        cached_open: bool = False,
    ) -> None:
        super().__init__(namespace, mode, read_only, cached_open)
        durable = Durability.of(durable_replicas, durable_timeout_ms, durable_aof)
        self.adopt_policy = adopt_policy
        self.client = client
        self.registry = ScriptRegistry(
            client,
            self.mode_asked,
            may_load=not read_only,
            migration_wait_s=migration_wait_s,
            cached=cached_open,
        )
        self.registry.durable = durable
        self.registry.ensure_library(self.policy_key)
        if read_only:
            self.policy = self._stored_policy()
            return
        known = self._opened_before(policy, replace_policy)
        self.policy = known if known is not None else self._open(policy, replace_policy)
        config = self._maxmemory_policy()
        if config is None:
            config = cache_of(client).maxmemory = {}
            # (CONFIG refused by an ACL or a managed server: nothing to check)
            with contextlib.suppress(RedisError):
                config = cache_of(client).maxmemory = client.config_get("maxmemory-policy")
        self._warn_if_keys_can_be_evicted(config, self.policy)

    @classmethod
    def from_url(
        cls: type[S], url: str, namespace: str, policy: Policy | None = None, **kwargs: Any
    ) -> S:
        """A store on a client of its own of ``url`` (a cluster client if the URL
        names a cluster node), which :meth:`close` closes; ``kwargs`` as the
        constructor's. ``with MemoryStore.from_url(url, "agent-42") as store:``"""
        client = client_from_url(url)
        try:
            store = cls(client, namespace, policy, **kwargs)
        except BaseException:
            close_client(client)
            raise
        store.owns_client = True
        return store

    def close(self) -> None:
        """Closes the client if this store made it (from_url); a client passed to
        the constructor stays open for its owner."""
        if self.owns_client:
            close_client(self.client)

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(self, call: Call[T], *, seen: str | None = None, wait: bool = True) -> T:
        """The call's result; ``seen`` and ``wait`` for a configure of the store's own
        (StoreBase._parts, ScriptRegistry.run)."""
        try:
            reply = self.registry.run(*self._parts(call, seen), wait=wait)
        except ResponseError as error:
            raise from_response(error) from None
        except NotDurable as error:  # (applied: its result is the caller's)
            error.result = call.parse(error.reply)
            raise
        return call.parse(reply)

    def _run(self, call: Call[T]) -> T:
        """Sends a call; one that finds its namespace damaged, gone or changed is sent
        again once the store has healed it, started it again or taken the change
        (StoreBase._after, _take), or fails NamespaceLost."""
        pending, sends = self._first_pending(call), 0
        while True:
            sends += 1
            try:
                if pending is not None:
                    self._take(pending)
                    pending = None
                result = self._send(call)
            except NotDurable:
                self._wrote(call)  # (applied)
                raise
            except (NoPolicy, NamespaceChanged) as error:
                pending = self._after(error, sends, self.policy)
            else:
                self._wrote(call)
                return result

    def _take(self, seen: str) -> None:
        """Takes the namespace as ``seen`` says it is now (StoreBase._after): its policy
        (configure, which also restores a field edited by hand); with "", after a call
        found no policy, a namespace whose other keys are there heals (configure
        rebuilds what is missing, keeping its incarnation, with the policy stored there
        if it has one) and one gone whole is started again if this store never wrote to
        it or it may have expired, else NamespaceLost (StoreBase._lost). The configure
        is the store's own: sent without a WAIT, the call sent after it waits for both."""
        if not seen:
            left = self.client.exists(*self._data_keys)
            lost = self._lost(left, self.policy)
            if lost is not None:
                raise lost
            seen = self._seen if left and self._acked else ""
        self.policy = self._configure(self.policy, False, seen=seen, wait=False)

    def _configure(self, policy: Policy | None, replace: bool, **how: Any) -> Policy:
        """Configures the namespace (``how``: _send's seen, none to check by default, and
        wait); the policy stored, and the namespace's seen taken (applied but not
        confirmed: NotDurable, whose result is that policy)."""
        call = self._configure_call(policy, replace)
        try:
            return self._configured(self._send(call, **{"seen": "", **how}))
        except NotDurable as error:
            self._not_confirmed(error)
            raise

    def _open(self, policy: Policy | None, replace: bool) -> Policy:
        """Configures the namespace when the store opens; the policy to use. A namespace
        with a key of the wrong type, which configure cannot heal, opens anyway (its
        calls raise WrongType; drop() deletes it)."""
        try:
            stored = self._configure(policy, replace)
        except WrongType:
            return policy if policy is not None else Policy()
        return self._checked(policy, stored)

    def recreate(self) -> Policy:
        """Starts the namespace again, empty, with this store's policy, after
        NamespaceLost (or configures it if it is there: it writes to that one from now
        on); returns the stored policy."""
        try:
            stored = self._configure(self.policy, False)
        except NotDurable as error:
            self.policy = cast(Policy, error.result)
            raise
        self.policy = self._checked(self.policy, stored)
        return self.policy

    def _stored_policy(self) -> Policy:
        try:
            values = self.client.hmget(self.policy_key, POLICY_FIELDS)
        except ResponseError as error:
            raise from_response(error) from None
        return self._parse_stored_policy(values)

    def set_policy(
        self, policy: Policy | None = None, *, now: int | None = None, **changes: Any
    ) -> Policy:
        """Replaces the namespace's stored policy for every worker (``policy``), or
        changes some of its fields in one atomic call (``set_policy(max_hot=7)``),
        from ``now`` on: a new half_life_s changes how fast recency falls from then.
        Returns the policy now in force (also ``self.policy``). A namespace whose keys
        were lost is configured again first, as by any other write."""
        try:
            self.policy = self._configured(self._run(self._set_policy_call(policy, changes, now)))
        except NotDurable as error:
            self.policy = cast(Policy, self._not_confirmed(error).result)
            raise
        return self.policy

    def reload_policy(self) -> Policy:
        """The namespace's stored policy, read now (another worker or an operator may
        have changed it since this store was made); also ``self.policy``."""
        self.policy = self._stored_policy()
        return self.policy

    def remember(
        self,
        id: str,
        importance: float,
        *,
        text: str | None = None,
        whitelist: bool = False,
        tokens: int = 1,
        group: str | None = None,
        now: int | None = None,
        call_id: str | None = None,
        terms: Sequence[str] | None = None,
    ) -> Remembered:
        """Adds or updates a memory (``tokens``: its cost in the token budget;
        ``group``: the group it joins, evicted, recalled and forgotten as one),
        evicting the lowest if the hot tier is over max_hot or max_tokens. A memory with
        text is indexed by ``terms`` for :meth:`search` (None: its text's, as
        memevict.terms makes them; []: not indexed)."""
        return self._run(
            commands.remember(
                id,
                importance,
                text=text,
                whitelist=whitelist,
                tokens=tokens,
                group=group,
                now=now,
                call_id=call_id,
                terms=self._terms(terms, self.policy),
            )
        )

    def remember_many(
        self,
        items: Sequence[Item | tuple[str, float]],
        *,
        now: int | None = None,
        call_id: str | None = None,
        evicted_texts: bool = False,
    ) -> Batch:
        """Remembers up to 100 memories in one atomic call, as if one by one
        at the same now, then evicts once; items are Item or (id, importance).
        ``evicted_texts``: the batch also holds the text of each memory it evicted,
        read in the same call (for a summariser of what leaves)."""
        return self._run(
            commands.remember_many(
                self._indexed(items, self.policy),
                now=now,
                call_id=call_id,
                evicted_texts=evicted_texts,
            )
        )

    def touch(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered | None:
        """Marks a hot memory as used now (evicting if that made the hot tier
        too full); None if it is cold; NotFound if unknown."""
        return self._run(commands.touch(id, now=now, call_id=call_id))

    def decay(self, rate: float, *, call_id: str | None = None) -> None:
        """Multiplies every non-whitelisted hot score by rate (0 < rate <= 1), in O(1)."""
        self._run(commands.decay(rate, call_id=call_id))

    def evict(self, *, now: int | None = None, call_id: str | None = None) -> Evicted:
        """Evicts down to max_hot (plus evict_batch) if the hot tier is over it."""
        return self._run(commands.evict(now=now, call_id=call_id))

    def whitelist(
        self, id: str, *, now: int | None = None, call_id: str | None = None
    ) -> Remembered:
        """Whitelists a memory (recalling it if cold); raises NotFound for an unknown id."""
        return self._run(commands.whitelist(id, now=now, call_id=call_id))

    def demote(self, id: str, *, now: int | None = None, call_id: str | None = None) -> Remembered:
        """Makes a whitelisted memory ordinary (``demoted == (id,)``), evicting if that
        made the hot tier too full; ``demoted`` is empty if it was not whitelisted."""
        return self._run(commands.demote(id, now=now, call_id=call_id))

    def recall(self, id: str, *, now: int | None = None, call_id: str | None = None) -> Remembered:
        """Brings a cold memory back to hot (or refreshes a hot one); NotFound if unknown."""
        return self._run(commands.recall(id, now=now, call_id=call_id))

    def forget(self, id: str, *, call_id: str | None = None) -> None:
        """Deletes a memory everywhere; NotFound if it is unknown."""
        return self._run(commands.forget(id, call_id=call_id))

    def get(self, id: str, *, now: int | None = None) -> Memory | None:
        """One memory, hot or cold, or None."""
        return self._run(commands.get(id, now=now))

    def search(
        self, query: str, k: int = 10, *, tier: str = "all", now: int | None = None
    ) -> list[Match]:
        """The memories (up to ``k``, at most 100) that best match ``query`` by their
        terms, best first, in the tier asked ("all", "hot" or "cold"), each with its
        relevance; only memories remembered with text (and terms) are found. Reads
        at most 4,000 postings whatever the namespace holds, and recalls nothing."""
        return self._run(commands.search(query, k, tier=tier, now=now))

    def top(self, k: int, *, now: int | None = None) -> list[Memory]:
        """The k highest-scored hot memories, highest first."""
        return self._run(commands.top(k, now=now))

    def stats(self, *, now: int | None = None) -> Stats:
        """Counts of hot, cold, whitelisted and protected memories."""
        return self._run(commands.stats(now=now))

    def window(
        self,
        tokens: int | None = None,
        *,
        query: str | None = None,
        share: float | None = None,
        now: int | None = None,
    ) -> Window:
        """The hot memories for a prompt, in the order first remembered, with
        text; with ``tokens``, the highest-ranked that fit in that many tokens,
        whole groups only (without ``tokens``, at most 400 memories). With a
        ``query``, ``share`` of ``tokens`` goes to the best matches the window
        would not take, as in :meth:`context` (``recalled`` names them)."""
        return self._run(commands.window(tokens, now=now, query=query, share=share))

    def explain(self, id: str, tokens: int | None = None, *, now: int | None = None) -> Explanation:
        """Why a memory ranks where it does: its score and the parts that make it,
        its protection, where the store holds it, its rank as :meth:`top` orders the
        hot memories and, with ``tokens``, whether ``window(tokens)`` holds it and if
        not why. An unknown id is not an error: its ``tier`` is "absent". Read-only,
        one round trip, bounded work (docs/lua-contract.md: lua/explain.lua)."""
        return self._run(commands.explain(id, tokens, now=now))

    def context(
        self,
        tokens: int | None = None,
        *,
        query: str | None = None,
        share: float | None = None,
        skip: Sequence[str] = (),
        now: int | None = None,
        detail: bool = False,
    ) -> Context:
        """What ``window`` returns, as (id, text) pairs only: a reply of 2 values a
        memory instead of 11, for a prompt that needs nothing else. ``skip``: up to
        100 ids left out, as if they were not hot (memories the caller sends itself
        and has counted in ``tokens``, such as a conversation's last messages).
        With a ``query`` (in a namespace whose policy has index=1), ``share`` of
        ``tokens`` (None: commands.recall_share, about 1,000 tokens, at most half)
        goes to the memories that best match it that the window would not take
        (cold, or hot but ranked out), each with its whole group; what they leave
        goes back to the window; ``recalled`` names them. Nothing is recalled.
        ``detail``: the reply also gives each memory's tokens and order."""
        return self._run(
            commands.context(tokens, now=now, skip=skip, query=query, share=share, detail=detail)
        )

    def version(self) -> Version | None:
        """The namespace's epoch, version and hot-tier tokens (one HGETALL of its state, a
        hash of one field; no script: a few µs of server time), or None if it has none
        (or one kept in fields by memevict 0.1.0, which a write packs). A reply read at
        the same epoch and version (``Context.version``, ``Batch.version``) is still
        what the namespace holds: every call that writes makes a new version."""
        try:
            fields = self.client.hgetall(self.state_key)
        except ResponseError as error:
            raise from_response(error) from None
        return version_of(fields)

    def evictions(self, since: str | None = None, count: int = 100) -> list[Eviction]:
        """The eviction log (``Policy.log_max``; 0, the default, keeps none), oldest
        first: the newest ``count`` entries, or the first ``count`` after ``since`` (the
        ``log_id`` of an entry read before: page on from the last one). One XREVRANGE
        or XRANGE of the log's stream, no script."""
        command, newest_first = read_command(self.log_key, since, count)
        try:
            entries = self.client.execute_command(*command)
        except ResponseError as error:
            raise from_response(error) from None
        return evictions_of(entries, newest_first)

    def scan(
        self, tier: Tier = "hot", cursor: int = 0, count: int = 100, *, now: int | None = None
    ) -> ScanPage:
        """One page of the memories of a tier; pass the returned cursor to the
        next call until it is 0. A memory that stays in the tier is returned
        at least once."""
        return self._run(commands.scan(tier, cursor, count, now=now))

    def drop(self) -> int:
        """Deletes the whole namespace (policy, memories, indexes) in one
        atomic call, whatever state it is in; returns the number of keys deleted. A
        later write through this store, or through a store that never wrote to it,
        starts the namespace again, empty; another store that had written to it raises
        NamespaceLost. Applied but not confirmed (NotDurable): the same."""
        try:
            dropped = self._send(commands.drop())
        finally:  # (NotDurable: applied; a connection error: perhaps, and then as here)
            self._dropped()
        return dropped
