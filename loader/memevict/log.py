"""The eviction log as the scripts write it (lib/memory.lua, log_left, is the source):
a stream per namespace, one entry per memory that left a tier, its fields id, reason,
score, importance and at, and group and from when they say more than the reason does.
Read with XRANGE / XREVRANGE (no script); sync and async stores share the arguments
and the parsing here."""

from __future__ import annotations

import re
from typing import Any

from memevict.errors import BadArgument
from memevict.results import Eviction

ROLE = "log"
MAX_COUNT = 200  # (as scan: a page, the next from its last log_id)
# Where each reason takes a memory (from, to); forget's from is a field of its own.
MOVES = {
    "max_hot": ("hot", "cold"),
    "max_tokens": ("hot", "cold"),
    "evict_batch": ("hot", "cold"),
    "cold_max": ("cold", "deleted"),
    "whitelist_cap": ("whitelist", "hot"),
    "demote": ("whitelist", "hot"),
    "forget": ("", "deleted"),
}
_LOG_ID = re.compile(r"[0-9]{1,20}(-[0-9]{1,20})?")


def read_command(key: str, since: str | None, count: int) -> tuple[list[str | int], bool]:
    """The command that reads ``count`` entries of the log at ``key`` (``since`` and
    ``count`` checked first): after ``since`` (XRANGE from it, exclusive), or the newest
    (XREVRANGE); and whether its reply is newest first."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise BadArgument(f"count must be a whole number in [1, {MAX_COUNT}], got {count!r}")
    if since is None:
        return ["XREVRANGE", key, "+", "-", "COUNT", count], True
    if not isinstance(since, str) or not _LOG_ID.fullmatch(since):
        raise BadArgument(
            f"since must be a log_id of an earlier Eviction ('<ms>-<n>'), got {since!r:.80}"
        )
    return ["XRANGE", key, f"({since}", "+", "COUNT", count], False


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def evictions_of(entries: list[Any], newest_first: bool) -> list[Eviction]:
    """The entries of XRANGE (or XREVRANGE: ``newest_first``) as Evictions, oldest first."""
    found = []
    for log_id, raw in reversed(entries) if newest_first else entries:
        fields = {_text(k): _text(v) for k, v in raw.items()}
        reason = fields["reason"]
        source, to = MOVES.get(reason, ("", ""))
        found.append(
            Eviction(
                log_id=_text(log_id),
                id=fields["id"],
                reason=reason,
                from_tier=fields.get("from", source),
                to_tier=to,
                score=float(fields["score"]),
                importance=float(fields["importance"]),
                at=int(float(fields["at"])),
                group=fields.get("group", ""),
            )
        )
    return found
