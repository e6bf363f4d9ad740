"""Errors: one class per code a script (or the server) can answer with.

Scripts fail with ``redis.error_reply("CODE detail")``; redis-py raises that as
``ResponseError("CODE detail script: ...")``. :func:`from_response` maps the
code to its class here. A code this module does not know raises
:class:`UnexpectedReply` rather than passing silently.
"""

from __future__ import annotations

from typing import ClassVar

from redis.exceptions import NoPermissionError, OutOfMemoryError, ReadOnlyError, ResponseError


class MemevictError(Exception):
    """Base class of every error memevict raises."""

    code: ClassVar[str] = ""


class InvalidArgument(MemevictError, ValueError):
    """An argument was rejected; nothing was written."""


class ArityError(InvalidArgument):
    code = "ARITY"


class BadArgument(InvalidArgument):
    code = "BAD_ARG"


class BadId(InvalidArgument):
    code = "BAD_ID"


class BadImportance(InvalidArgument):
    code = "BAD_IMPORTANCE"


class BadNow(InvalidArgument):
    code = "BAD_NOW"


class BadRate(InvalidArgument):
    code = "BAD_RATE"


class BadTokens(InvalidArgument):
    code = "BAD_TOKENS"


class BadGroup(InvalidArgument):
    code = "BAD_GROUP"


class BadTerms(InvalidArgument):
    """Terms for the lexical index that are not 1..64 bytes each without a space or a
    NUL, or too many (docs/lua-contract.md: terms)."""

    code = "BAD_TERMS"


class OverBudget(InvalidArgument):
    """A memory costs more tokens than the whole token budget (max_tokens)."""

    code = "OVER_BUDGET"


class GroupFull(InvalidArgument):
    """The group already has the most members a group may have (100)."""

    code = "GROUP_FULL"


class BadPolicy(InvalidArgument):
    code = "BAD_POLICY"


class BadNamespace(InvalidArgument):
    code = "BAD_NAMESPACE"


class BadKeys(InvalidArgument):
    """KEYS do not follow the layout <prefix><role> with one shared prefix (raw script calls)."""

    code = "BAD_KEYS"


class WrongType(MemevictError):
    """A key of the namespace holds a value of the wrong Redis type."""

    code = "WRONG_TYPE"


class NoPolicy(MemevictError):
    """The namespace has no stored policy (configure was never called, or it was deleted)."""

    code = "NO_POLICY"


class NotFound(MemevictError):
    """The memory id is not in the namespace."""

    code = "NOT_FOUND"


class PolicyMismatch(MemevictError):
    """The policy given differs from the one stored for the namespace."""

    code = "POLICY_MISMATCH"


class OutOfMemory(MemevictError):
    """The server is at maxmemory and refuses writes; nothing was written."""

    code = "OOM"


class ReadOnly(MemevictError):
    """A write was sent to a read-only replica."""

    code = "READONLY"


class PermissionDenied(MemevictError):
    """The server's ACL refuses this user a command or a key memevict needs."""

    code = "NOPERM"


class Busy(MemevictError):
    """The server is busy running another script past busy-reply-threshold; nothing ran."""

    code = "BUSY"


class ScriptKilled(MemevictError):
    """SCRIPT KILL stopped the call. Redis only kills a script that has not
    written yet (otherwise it answers UNKILLABLE), so nothing of it was applied."""

    code = "KILLED"


class SlotMigrating(MemevictError):
    """On a cluster: the namespace's slot was being migrated to another node
    for longer than the store waits (``migration_wait_s``). The nodes refused
    the call (TRYAGAIN) before running it, so nothing was written."""

    code = "TRYAGAIN"


class NotLoaded(MemevictError):
    """Functions mode: the server lacks the memevict library (or has another
    version of it), and this store may not load it (a read-only store)."""

    code = "NOT_LOADED"


class ReplyNotKept(MemevictError):
    """A resent call that had been applied already, whose reply (over the 16 KB a
    receipt keeps) could not be returned again. It was not applied twice; read
    the state (get, stats) to see what it did."""

    code = "REPLY_NOT_KEPT"


class NamespaceLost(MemevictError):
    """A namespace this store had written to is gone from the server (FLUSHDB, a drop()
    by another store, a restart without persistence, a failover to a server that never
    had it) and could not have expired by idle_ttl_s since this store last wrote.
    Nothing was written on this server: the store does not create it again on its own,
    since writes acknowledged into a namespace the server then loses would be lost
    unseen. (A call resent after its connection failed, as in a failover, may have been
    applied by the server it first reached, and reach the new primary by replication.)
    Call ``store.recreate()`` to start it again, empty, on purpose."""

    code = "NAMESPACE_LOST"


class NamespaceChanged(MemevictError):
    """A write was made for a namespace (its ``seen`` argument: the incarnation and policy
    revision its caller last saw) that is not the one there now: the namespace was made
    again since (its keys lost, or dropped, and made anew) or its policy changed. Nothing
    was written. ``seen`` is the namespace's incarnation and revision now ('' if it does
    not exist). A store handles it itself: it raises NamespaceLost, or takes the new
    policy (or, having written nothing there, the new namespace) and sends the call again;
    it reaches callers of the raw scripts only."""

    code = "NAMESPACE_CHANGED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        first = message.split(" ", 1)[0]
        self.seen = "" if first == "-" else first


class NotDurable(MemevictError):
    """A write of a store with ``durable_replicas`` was applied on the primary, but fewer
    replicas (or, with ``durable_aof``, not the append-only files) confirmed it within
    ``durable_timeout_ms``: a failover now may lose it. ``result`` is what the call
    returned; ``replicas`` how many confirmed (``aof_local``: whether the primary's AOF
    did, with durable_aof). Send the same call again with the same ``call_id`` (it is
    answered from the receipt, not applied twice, and waits again), or accept it."""

    code = "NOT_DURABLE"

    def __init__(
        self, message: str, reply: object, replicas: int, aof_local: bool | None = None
    ) -> None:
        super().__init__(message)
        self.reply = reply  # the script's raw reply
        self.result: object = None  # the call's parsed result (set by the store)
        self.replicas = replicas
        self.aof_local = aof_local


class UnexpectedReply(MemevictError):
    """The server answered with an error code memevict does not know."""

    code = "UNEXPECTED"


class UnsafeMaxmemoryPolicy(UserWarning):
    """The server's maxmemory-policy may evict memevict's keys: any key (allkeys-*), or,
    in a namespace with idle_ttl_s, any key with a TTL (volatile-*)."""


_BY_CODE: dict[str, type[MemevictError]] = {
    cls.code: cls
    for cls in (
        ArityError,
        BadArgument,
        BadId,
        BadImportance,
        BadNow,
        BadRate,
        BadTokens,
        BadGroup,
        BadTerms,
        OverBudget,
        GroupFull,
        BadPolicy,
        BadNamespace,
        BadKeys,
        WrongType,
        NoPolicy,
        NotFound,
        PolicyMismatch,
        OutOfMemory,
        ReadOnly,
        PermissionDenied,
        Busy,
        ReplyNotKept,
        NamespaceChanged,
    )
}


# A plain command's (the store's HMGET of a key planted with another type).
_BY_CODE["WRONGTYPE"] = WrongType

_BY_REDIS_PY: tuple[tuple[type[ResponseError], type[MemevictError]], ...] = (
    (OutOfMemoryError, OutOfMemory),
    (ReadOnlyError, ReadOnly),
    (NoPermissionError, PermissionDenied),
)


def from_response(error: ResponseError) -> MemevictError:
    """The typed error for a server error reply."""
    message = str(error)
    # redis-py strips these codes and raises its own classes instead.
    for theirs, ours in _BY_REDIS_PY:
        if isinstance(error, theirs):
            return ours(message)
    if message.startswith("Script killed by user"):  # Redis sends it without a code
        return ScriptKilled(message.rsplit(" script: ", 1)[0])
    code, _, detail = message.partition(" ")
    # Redis appends " script: <sha>, on @user_script:N." to errors raised in scripts.
    detail = detail.rsplit(" script: ", 1)[0]
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnexpectedReply(message)
    return cls(detail)
