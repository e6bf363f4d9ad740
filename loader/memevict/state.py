"""A namespace's state hash as the scripts keep it: one field, ``packed``,
eight little-endian doubles in the order of STATE_FIELDS (lua/lib/policy.lua,
read_state, is the source; tests/test_policy.py checks the two agree)."""

from __future__ import annotations

import struct
from typing import Any

from memevict.scripts import key_name

STATE_FIELDS = ("epoch", "decay", "seq", "g0", "x0", "latest", "wbase", "tokens")
STATE_FORMAT = "<8d"


def unpack_state(packed: bytes) -> dict[str, float]:
    """The state's fields from its packed value."""
    return dict(zip(STATE_FIELDS, struct.unpack(STATE_FORMAT, packed), strict=True))


def read_state(client: Any, namespace: str) -> dict[str, float] | None:
    """The state of a namespace (a sync client), or None if it has none."""
    packed = client.hget(key_name(namespace, "state"), "packed")
    return None if packed is None else unpack_state(packed)
