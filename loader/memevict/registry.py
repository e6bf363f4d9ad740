"""How one script call goes to the server, shared by the sync and async stores.

Two modes run the same Lua (memevict/functions.py):

scripts    EVALSHA (EVALSHA_RO for the read-only scripts, so replicas and
           read-only ACL users can serve them). After NOSCRIPT (a restart,
           SCRIPT FLUSH) the call is sent again as EVAL with the source, which
           runs it and caches it in the same round trip, so a flush racing the
           call cannot fail it.
functions  FCALL / FCALL_RO of the ``memevict_<version>`` library. A store checks the
           library's version once and loads it if it differs; a call that
           finds the library missing (FUNCTION FLUSH, a server without
           persistence restarted) loads it and is sent again.

A store asks for "auto" by default: functions where they can serve it (a cluster
client too), scripts where they cannot (RegistryBase).

While a cluster slot migrates, a node serves a multi-key script only if it
holds every one of its keys; a write's fresh receipt key never exists yet, so
writes (and reads of a namespace with an empty role) get TRYAGAIN, which
redis-py retries a few times and then gives up on ("TTL exhausted"). The node
refuses before the script runs, so the registry sends the call again, pausing
10 ms doubling to 200 ms, for up to ``migration_wait_s`` (then SlotMigrating).

On a cluster, redis-py routes EVALSHA and EVAL by their keys for free but asks
the server (COMMAND GETKEYS, one more round trip) for the keys of EVALSHA_RO
and FCALL. So there read-only scripts go as EVALSHA (they carry the
no-writes flag themselves) and an FCALL names the node that owns the
namespace's slot; redis-py still follows MOVED and ASK from there, but does
not retry a call with a named node after a connection error. The registry
does, as redis-py does for EVALSHA: after a lost connection, a timeout or
CLUSTERDOWN (a failover under way) it refreshes the slot map and sends the
call again to the slot's owner, pausing as above, for up to
``migration_wait_s``; an EVALSHA whose own resends by redis-py ran out first
(a failover longer than its 2 to 3 s) gets the same. A resent write is
applied once: its receipt answers a repeat.

A durable store (``durable_replicas``: :class:`Durability`) sends each write
with a WAIT (or WAITAOF) after it, pipelined on the same connection (on a
cluster, of the node that owns the namespace's slot): one round trip, and
NotDurable when fewer replicas confirm in time than asked. A write the store
makes on its own before the caller's (``wait=False``: a configure that heals
or starts the namespace) is sent without one: the caller's write, sent after
it, waits for the replicas to reach both (replication keeps their order), so a
NotDurable only ever describes the caller's call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeGuard, TypeVar, cast

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    NoPermissionError,
    NoScriptError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

from memevict.clientcache import cache_of
from memevict.errors import (
    BadArgument,
    MemevictError,
    NotDurable,
    NotLoaded,
    PermissionDenied,
    SlotMigrating,
    from_response,
)
from memevict.functions import function_name, library
from memevict.scripts import ArgValue, ScriptSpec, specs

Mode = Literal["scripts", "functions"]
# What a store is asked for: "auto" (the default) is functions where the
# server has them and this store may use them, else scripts (RegistryBase).
Choice = Literal["auto", "scripts", "functions"]
MODES: tuple[Choice, ...] = ("auto", "scripts", "functions")

SyncClient = redis.Redis | RedisCluster
AsyncClient = redis.asyncio.Redis | AsyncRedisCluster
C = TypeVar("C", bound=SyncClient | AsyncClient)
Argv = Sequence[ArgValue]  # a script call's KEYS or ARGV


MIGRATION_WAIT_S = 5.0


def check_wait(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise MemevictError(f"migration_wait_s must be a number >= 0, got {seconds!r}")
    return float(seconds)


def refused_while_migrating(error: Exception) -> bool:
    """redis-py's answer to TRYAGAIN (its own retries used up): a slot migrates."""
    if isinstance(error, TryAgainError):
        return True
    return isinstance(error, ClusterError) and str(error).startswith("TTL exhausted")


# What redis-py retries a keyed cluster command on (RedisCluster.ERRORS_ALLOW_RETRY):
# the node is gone or the cluster is failing over.
NODE_LOST = (redis.ConnectionError, redis.TimeoutError, ClusterDownError, SlotNotCoveredError)


def pauses(wait_s: float) -> Iterator[float]:
    """The pauses before each resend of a call refused while its slot migrates."""
    pause, waited = 0.01, 0.0
    while waited + pause <= wait_s:
        yield pause
        waited += pause
        pause = min(pause * 2, 0.2)


def still_migrating(wait_s: float) -> SlotMigrating:
    return SlotMigrating(
        f"the namespace's cluster slot was still migrating after {wait_s:g} s of retries "
        "(TRYAGAIN); nothing was written"
    )


def check_mode(mode: str) -> Choice:
    if mode not in MODES:
        raise MemevictError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


@dataclass(frozen=True, slots=True)
class Durability:
    """What a durable store waits for after each write: ``replicas`` replicas
    (WAIT), and with ``aof`` the primary's append-only file too (WAITAOF: Redis
    7.2+, Valkey), for up to ``timeout_ms`` (0: no limit)."""

    replicas: int
    timeout_ms: int
    aof: bool = False

    @classmethod
    def of(cls, replicas: int, timeout_ms: int, aof: bool) -> Durability | None:
        """The durability asked for, checked (None: none, the default)."""
        for name, value, lo in (("replicas", replicas, 0), ("timeout_ms", timeout_ms, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise BadArgument(f"durable_{name} must be a whole number >= {lo}, got {value!r}")
        if not isinstance(aof, bool):
            raise BadArgument(f"durable_aof must be True or False, got {aof!r}")
        if replicas == 0 and not aof:
            return None
        return cls(replicas, timeout_ms, aof)

    @property
    def command(self) -> tuple[str | int, ...]:
        if self.aof:
            return ("WAITAOF", 1, self.replicas, self.timeout_ms)
        return ("WAIT", self.replicas, self.timeout_ms)

    def confirmed(self, reply: Any, answer: Any) -> Any:
        """``reply`` if WAIT's (or WAITAOF's) ``answer`` confirms it, else NotDurable."""
        if isinstance(reply, Exception):
            raise reply
        if isinstance(answer, Exception):  # (WAITAOF on Redis < 7.2, or without appendonly)
            raise NotDurable(
                f"applied on the primary, not confirmed: the server refused "
                f"{self.command[0]} ({answer})",
                reply,
                0,
            )
        local, replicas = (bool(answer[0]), int(answer[1])) if self.aof else (None, int(answer))
        if replicas >= self.replicas and local is not False:
            return reply
        aof = "" if local is None else f" (the primary's AOF: {'yes' if local else 'no'})"
        raise NotDurable(
            f"applied on the primary, confirmed by {replicas} of the {self.replicas} replicas "
            f"asked{aof} within {self.timeout_ms} ms: a failover now may lose it; send the "
            "same call with the same call_id again (answered from its receipt) or accept it",
            reply,
            replicas,
            local,
        )


@dataclass(frozen=True, slots=True)
class Invocation:
    """One script call as server commands: ``command`` first; if the server
    lacks the script, ``fallback()`` (EVAL with the source: ``command`` with
    its first two words replaced by ``fallback_head``) or, when that is None,
    the library loaded and ``command`` sent again. ``route``: keyword
    arguments for redis-py's execute_command (the target node on a cluster)."""

    command: tuple[ArgValue, ...]
    fallback_head: tuple[str, str] | None
    route: dict[str, Any]
    mode: Mode

    def fallback(self) -> tuple[ArgValue, ...] | None:
        if self.fallback_head is None:
            return None
        return (*self.fallback_head, *self.command[2:])

    def lacks_script(self, error: ResponseError) -> bool:
        if self.mode == "scripts":
            return isinstance(error, NoScriptError)
        return str(error).startswith("Function not found")


def invocation(
    client: SyncClient | AsyncClient,
    mode: Mode,
    spec: ScriptSpec,
    keys: Sequence[ArgValue],
    args: Sequence[ArgValue],
) -> Invocation:
    if mode == "functions":
        verb = "FCALL_RO" if spec.read_only else "FCALL"
        command = (verb, function_name(spec.name), b"%d" % len(keys), *keys, *args)
        return Invocation(command, None, node_of(client, keys[0]), mode)
    read_only = spec.read_only and not is_cluster(client)
    evalsha, eval_ = ("EVALSHA_RO", "EVAL_RO") if read_only else ("EVALSHA", "EVAL")
    head = (evalsha, spec.sha, b"%d" % len(keys))
    return Invocation((*head, *keys, *args), (eval_, spec.source), {}, mode)


def is_cluster(
    client: SyncClient | AsyncClient,
) -> TypeGuard[RedisCluster | AsyncRedisCluster]:
    return isinstance(client, RedisCluster | AsyncRedisCluster)


def node_of(client: SyncClient | AsyncClient, key: ArgValue) -> dict[str, Any]:
    """execute_command's keyword naming the node that serves ``key`` (a cluster only)."""
    if is_cluster(client):  # (a store's keys are UTF-8 bytes)
        name = key.decode() if isinstance(key, bytes) else key
        return {"target_nodes": client.get_node_from_key(name)}
    return {}


def version_invocation(client: SyncClient | AsyncClient, key: str) -> Invocation:
    """FCALL_RO of the library's version function, routed by ``key``."""
    command = ("FCALL_RO", library().version_function, b"1", key)
    return Invocation(command, None, node_of(client, key), "functions")


def library_current(reply: Any) -> bool:
    value = reply.decode() if isinstance(reply, bytes) else reply
    return bool(value == library().version)


def not_loaded(reason: str) -> NotLoaded:
    return NotLoaded(
        f"the memevict function library {reason} on this server and this store may not "
        "load it (read_only); run `memevict load --functions` against the primary"
    )


class RegistryBase(Generic[C]):
    """What both registries hold: the scripts, the mode and the client.

    ``mode="auto"`` starts in functions mode and falls back to
    scripts, for good, where functions cannot serve this store: the server
    has no FCALL (Redis < 7), the ACL refuses it, or the library is missing
    (or of another version) and this store may not load it (read-only, or an
    ACL without FUNCTION LOAD, such as memevict.acl's rules). ensure_library, which
    every store runs once when it opens, makes the choice; a library lost
    later (FUNCTION FLUSH) that this store may not load again makes it too.
    An explicit mode never falls back."""

    def __init__(
        self,
        client: C,
        mode: Choice = "scripts",
        *,
        may_load: bool = True,
        migration_wait_s: float = MIGRATION_WAIT_S,
        cached: bool = False,
    ) -> None:
        self.specs: dict[str, ScriptSpec] = dict(specs())
        self.auto = check_mode(mode) == "auto"
        self.mode: Mode = "functions" if mode == "auto" else mode
        self.may_load = may_load  # False: a read-only store, which must not FUNCTION LOAD
        self.cached = cached  # ensure_library takes what a store before found (cached_open)
        self.migration_wait_s = check_wait(migration_wait_s)
        self._client: C = client
        # RedisCluster.execute_command has no annotations; every call goes through here.
        self._execute: Any = cast(Any, client).execute_command
        self.durable: Durability | None = None  # (set by a durable store)

    def _waits(self, spec: ScriptSpec, wait: bool) -> bool:
        """Whether a call is sent with a WAIT: a write of a durable store, unless the
        store sends it on its own before the caller's (``wait`` False)."""
        return wait and self.durable is not None and not spec.read_only

    def check_durable(self) -> None:
        """BadArgument, before anything is sent, if this store is durable and its client
        cannot pipeline a write with its WAIT (an asyncio cluster client)."""
        if self.durable is not None and isinstance(self._client, AsyncRedisCluster):
            raise BadArgument("durable writes need a redis.Redis or a sync RedisCluster client")

    def _pipe(self, keys: Sequence[ArgValue]) -> Any:
        """A pipeline on one connection of the server that owns ``keys``: the
        node of their slot on a cluster (its own client)."""
        self.check_durable()
        client: Any = self._client
        if isinstance(client, RedisCluster):
            client = client.get_redis_connection(node_of(client, keys[0])["target_nodes"])
        return client.pipeline(transaction=False)

    def _resends(self, error: Exception) -> bool:
        """Whether a call that failed with ``error`` is sent again: refused
        while its slot migrates, or, on a cluster, its node lost or failing over
        (NODE_LOST): an FCALL, routed by hand, or an EVALSHA whose own resends
        by redis-py (2 to 3 s) ran out before a replica took over."""
        if refused_while_migrating(error):
            return True
        # (AskError, MovedError: a durable write sent to a node that no longer owns the slot)
        return is_cluster(self._client) and isinstance(error, (*NODE_LOST, AskError))

    def _gave_up(self, error: Exception) -> Exception:
        """What a call raises once ``migration_wait_s`` is spent."""
        if refused_while_migrating(error):
            return still_migrating(self.migration_wait_s)
        return error

    def _fall_back(self, error: Exception) -> None:
        """Functions cannot serve this store: scripts from now on if it chose
        automatically, else ``error``."""
        if not self.auto:
            raise error
        self.mode = "scripts"

    def _library_at(self, key: str) -> tuple[bool, bool, str]:
        """What the mode found for ``key`` depends on: auto or not, may load or
        not, and the node (a cluster's node that serves ``key``)."""
        node = node_of(self._client, key).get("target_nodes")
        return self.auto, self.may_load, str(getattr(node, "name", ""))

    def _checked_before(self, key: str) -> bool:
        """Whether a store before this one on the client checked the library at
        ``key``'s node: then this one takes the mode it found (memevict/clientcache.py;
        a library lost since is loaded by the call that finds it missing)."""
        mode = cache_of(self._client).modes.get(self._library_at(key))
        if mode is None or not self.cached:
            return False
        self.mode = cast(Mode, mode)
        return True

    def _note_checked(self, key: str) -> None:
        cache_of(self._client).modes[self._library_at(key)] = self.mode

    def _version_known(self, ask: Invocation, error: ResponseError) -> bool:
        """Whether an error of the version call means only that the library
        is missing (then it may be loaded); a server without Functions or an
        ACL refusing FCALL_RO falls back; any other error is raised."""
        if ask.lacks_script(error):
            return True
        if not (isinstance(error, NoPermissionError) or str(error).startswith("unknown command")):
            raise from_response(error) from None
        self._fall_back(from_response(error))
        return False


class ScriptRegistry(RegistryBase[SyncClient]):
    """The package's scripts on one client (``redis.Redis`` or ``RedisCluster``)."""

    def load(self) -> dict[str, str]:
        """Loads every script (SCRIPT LOAD, or FUNCTION LOAD REPLACE of the
        library in functions mode) on every primary; returns name -> SHA1, or
        name -> function name."""
        try:
            if self.mode == "functions":
                self._client.function_load(library().source, replace=True)
                return {name: function_name(name) for name in self.specs}
            return {name: self._client.script_load(s.source) for name, s in self.specs.items()}
        except ResponseError as error:
            raise from_response(error) from None

    def ensure_library(self, key: str) -> None:
        """Functions mode: loads the library unless the server at ``key``'s
        node has this version of it (a store opened with cached_open: unless a
        store before it on the client checked: RegistryBase._checked_before)."""
        if self.mode != "functions" or self._checked_before(key):
            return
        self._check_library(key)
        self._note_checked(key)

    def _check_library(self, key: str) -> None:
        ask = version_invocation(self._client, key)
        try:
            current = library_current(self._execute(*ask.command, **ask.route))
        except ResponseError as error:
            if not self._version_known(ask, error):
                return
            current = False
        if not current:
            self._load_or_fall_back("is missing or of another version")

    def _load_or_fall_back(self, reason: str) -> None:
        try:
            if not self.may_load:
                raise not_loaded(reason)
            self.load()
        except (NotLoaded, PermissionDenied) as error:
            self._fall_back(error)

    def run(self, spec: ScriptSpec, keys: Argv, args: Argv, *, wait: bool = True) -> Any:
        """The script's reply; a durable store's write waits for its replicas unless
        ``wait`` is False (see the module's docstring)."""
        waits = pauses(self.migration_wait_s)
        while True:
            try:
                return self._attempt(spec, keys, args, wait)
            except (*NODE_LOST, ClusterError, TryAgainError, AskError) as error:
                if not self._resends(error):
                    raise
                pause = next(waits, None)
                if pause is None:
                    raise self._gave_up(error) from None
                time.sleep(pause)
                if isinstance(error, (*NODE_LOST, AskError)):
                    self._refresh_slots()

    def _refresh_slots(self) -> None:
        """The cluster's slot map read again (a failover may have moved the
        slot); a node that does not answer yet leaves the old map."""
        try:
            cast(RedisCluster, self._client).nodes_manager.initialize()
        except (*NODE_LOST, ClusterError):
            pass

    def _attempt(self, spec: ScriptSpec, keys: Argv, args: Argv, wait: bool) -> Any:
        call = invocation(self._client, self.mode, spec, keys, args)
        send = self._durably(keys) if self._waits(spec, wait) else self._execute
        try:
            return send(*call.command, **call.route)
        except ResponseError as error:
            if not call.lacks_script(error):
                raise
        fallback = call.fallback()
        if fallback is not None:
            return send(*fallback, **call.route)
        self._load_or_fall_back("is missing")
        if self.mode == "scripts":  # (it fell back)
            return self._attempt(spec, keys, args, wait)
        return send(*call.command, **call.route)

    def _durably(self, keys: Sequence[ArgValue]) -> Any:
        """execute_command for a write of a durable store: the write and its WAIT
        in one pipeline (see the module's docstring)."""
        durable = cast(Durability, self.durable)

        def send(*command: ArgValue, **_: Any) -> Any:
            pipe = self._pipe(keys)
            pipe.execute_command(*command)
            pipe.execute_command(*durable.command)
            return durable.confirmed(*pipe.execute(raise_on_error=False))

        return send


class AsyncScriptRegistry(RegistryBase[AsyncClient]):
    """ScriptRegistry for ``redis.asyncio`` clients: the same calls, awaited."""

    async def load(self) -> dict[str, str]:
        """As ScriptRegistry.load."""
        try:
            if self.mode == "functions":
                await self._client.function_load(library().source, replace=True)
                return {name: function_name(name) for name in self.specs}
            return {
                name: await self._client.script_load(s.source) for name, s in self.specs.items()
            }
        except ResponseError as error:
            raise from_response(error) from None

    async def _routable(self) -> None:
        """An asyncio cluster client reads the slot map on its first command;
        routing an FCALL by hand needs it before."""
        if self.mode == "functions" and isinstance(self._client, AsyncRedisCluster):
            await self._client.initialize()  # once; then it returns at once

    async def ensure_library(self, key: str) -> None:
        """As ScriptRegistry.ensure_library."""
        if self.mode != "functions":
            return
        await self._routable()
        if self._checked_before(key):
            return
        await self._check_library(key)
        self._note_checked(key)

    async def _check_library(self, key: str) -> None:
        ask = version_invocation(self._client, key)
        try:
            current = library_current(await self._execute(*ask.command, **ask.route))
        except ResponseError as error:
            if not self._version_known(ask, error):
                return
            current = False
        if not current:
            await self._load_or_fall_back("is missing or of another version")

    async def _load_or_fall_back(self, reason: str) -> None:
        try:
            if not self.may_load:
                raise not_loaded(reason)
            await self.load()
        except (NotLoaded, PermissionDenied) as error:
            self._fall_back(error)

    async def run(self, spec: ScriptSpec, keys: Argv, args: Argv, *, wait: bool = True) -> Any:
        """As ScriptRegistry.run."""
        await self._routable()
        waits = pauses(self.migration_wait_s)
        while True:
            try:
                return await self._attempt(spec, keys, args, wait)
            except (*NODE_LOST, ClusterError, TryAgainError, AskError) as error:
                if not self._resends(error):
                    raise
                pause = next(waits, None)
                if pause is None:
                    raise self._gave_up(error) from None
                await asyncio.sleep(pause)
                if isinstance(error, (*NODE_LOST, AskError)):
                    await self._refresh_slots()

    async def _refresh_slots(self) -> None:
        """As ScriptRegistry._refresh_slots."""
        try:
            await cast(AsyncRedisCluster, self._client).nodes_manager.initialize()
        except (*NODE_LOST, ClusterError):
            pass

    async def _attempt(self, spec: ScriptSpec, keys: Argv, args: Argv, wait: bool) -> Any:
        call = invocation(self._client, self.mode, spec, keys, args)
        send = self._durably(keys) if self._waits(spec, wait) else self._execute
        try:
            return await send(*call.command, **call.route)
        except ResponseError as error:
            if not call.lacks_script(error):
                raise
        fallback = call.fallback()
        if fallback is not None:
            return await send(*fallback, **call.route)
        await self._load_or_fall_back("is missing")
        if self.mode == "scripts":  # (it fell back)
            return await self._attempt(spec, keys, args, wait)
        return await send(*call.command, **call.route)

    def _durably(self, keys: Sequence[ArgValue]) -> Any:
        """As ScriptRegistry._durably, awaited."""
        durable = cast(Durability, self.durable)

        async def send(*command: ArgValue, **_: Any) -> Any:
            pipe = self._pipe(keys)
            pipe.execute_command(*command)
            pipe.execute_command(*durable.command)
            return durable.confirmed(*await pipe.execute(raise_on_error=False))

        return send
