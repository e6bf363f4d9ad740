"""A namespace's state hash as the scripts keep it: one field, ``packed``,
nine little-endian doubles in the order of STATE_FIELDS (lua/lib/policy.lua,
read_state, is the source; tests/test_policy.py checks the two agree); eight,
without the version, as memevict before issue 41 packed it (read as version 0)."""

from __future__ import annotations

import struct
from typing import Any

from memevict.results import Version
from memevict.scripts import key_name

STATE_FIELDS = ("epoch", "decay", "seq", "g0", "x0", "latest", "wbase", "tokens", "ver")
STATE_FORMAT = "<9d"
_BEFORE_VERSION = "<8d"  # (memevict before issue 41)


def unpack_state(packed: bytes) -> dict[str, float]:
    """The state's fields from its packed value (version 0 in one packed before it)."""
    if len(packed) == struct.calcsize(_BEFORE_VERSION):
        values = (*struct.unpack(_BEFORE_VERSION, packed), 0.0)
        return dict(zip(STATE_FIELDS, values, strict=True))
    return dict(zip(STATE_FIELDS, struct.unpack(STATE_FORMAT, packed), strict=True))


def read_state(client: Any, namespace: str) -> dict[str, float] | None:
    """The state of a namespace (a sync client), or None if it has none."""
    packed = client.hget(key_name(namespace, "state"), "packed")
    return None if packed is None else unpack_state(packed)


def version_of(fields: dict[Any, Any]) -> Version | None:
    """The namespace's :class:`Version` from its state hash's fields (HGETALL): None
    without a packed state, or with fields besides it (memevict 0.1.0's)."""
    packed = fields.get(b"packed", fields.get("packed"))
    if len(fields) != 1 or packed is None:
        return None
    if len(packed) not in (struct.calcsize(STATE_FORMAT), struct.calcsize(_BEFORE_VERSION)):
        return None
    state = unpack_state(packed)
    return Version(int(state["epoch"]), int(state["ver"]), int(state["tokens"]))
