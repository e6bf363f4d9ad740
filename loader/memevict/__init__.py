"""memevict: importance x recency x whitelist eviction for AI agent memory, in Redis Lua."""

from memevict.aio import AsyncMemoryStore
from memevict.commands import Item
from memevict.errors import (
    ArityError,
    BadArgument,
    BadId,
    BadImportance,
    BadKeys,
    BadNamespace,
    BadNow,
    BadPolicy,
    BadRate,
    Busy,
    InvalidArgument,
    MemevictError,
    NoPolicy,
    NotFound,
    NotLoaded,
    OutOfMemory,
    PermissionDenied,
    PolicyMismatch,
    ReadOnly,
    ReplyNotKept,
    ScriptKilled,
    SlotMigrating,
    UnexpectedReply,
    UnsafeMaxmemoryPolicy,
    WrongType,
)
from memevict.policy import Policy
from memevict.results import Batch, Evicted, Memory, Remembered, Stats
from memevict.store import MemoryStore, ScriptRegistry

__version__ = "0.1.0"

__all__ = [
    "ArityError",
    "AsyncMemoryStore",
    "BadArgument",
    "BadId",
    "BadImportance",
    "BadKeys",
    "BadNamespace",
    "BadNow",
    "BadPolicy",
    "BadRate",
    "Batch",
    "Busy",
    "Evicted",
    "InvalidArgument",
    "Item",
    "MemevictError",
    "Memory",
    "MemoryStore",
    "NoPolicy",
    "NotFound",
    "NotLoaded",
    "OutOfMemory",
    "PermissionDenied",
    "Policy",
    "PolicyMismatch",
    "ReadOnly",
    "Remembered",
    "ReplyNotKept",
    "ScriptKilled",
    "ScriptRegistry",
    "SlotMigrating",
    "Stats",
    "UnexpectedReply",
    "UnsafeMaxmemoryPolicy",
    "WrongType",
]
