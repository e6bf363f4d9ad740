"""Policy: every number the eviction rules use, stored per namespace in Redis."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from memevict.errors import BadPolicy

# What recency is measured in (mirrors the 'word' field of POLICY in lua/lib/policy.lua).
CLOCKS = ("activity", "wall")
# Numbers: (lowest allowed, whether the lowest itself is excluded); mirrors POLICY in
# lua/lib/policy.lua.
_RANGES: Mapping[str, tuple[float, bool]] = {
    "max_hot": (1, False),
    "evict_batch": (0, False),
    "half_life_memories": (0, True),
    "half_life_s": (0, True),
    "whitelist_boost": (1, False),
    "whitelist_cap": (0, False),
    "protect_s": (0, False),
    "score_min": (0, False),
    "jitter": (0, False),
    "cold_max": (0, False),
    "retry_window_s": (0, False),
}


@dataclass(frozen=True, slots=True)
class Policy:
    """The eviction parameters of one namespace.

    max_hot: hot memories kept before eviction starts.
    evict_batch: extra memories evicted once eviction starts.
    clock: what recency is measured in: "activity", memories remembered in the
        namespace since (a namespace nobody writes to does not age), or "wall",
        the server's time.
    half_life_memories: memories remembered for a memory's recency to halve (activity clock).
    half_life_s: seconds for a memory's recency to halve (wall clock).
    whitelist_boost: score multiplier of whitelisted memories.
    whitelist_cap: most whitelisted memories at once; past it the lowest are demoted.
    protect_s: seconds a remembered or recalled memory cannot be evicted.
    score_min: floor of reported non-whitelisted scores.
    jitter: tie-breaking offsets added to scores lie in (0, jitter).
    cold_max: most memories in the cold tier; past it the least recently evicted go for good.
    retry_window_s: seconds a write call's receipt is kept, so that a call resent by the
        client's retry within it is applied once (0 turns receipts off).
    """

    max_hot: int = 100
    evict_batch: int = 0
    clock: str = "activity"
    half_life_memories: float = 500.0
    half_life_s: float = 1800.0
    whitelist_boost: float = 10.0
    whitelist_cap: int = 20
    protect_s: float = 30.0
    score_min: float = 0.1
    jitter: float = 0.001
    cold_max: int = 10_000
    retry_window_s: float = 60.0

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise BadPolicy(f"clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        for field in fields(self):
            if field.name == "clock":
                continue
            value = getattr(self, field.name)
            lowest, exclusive = _RANGES[field.name]
            whole = field.type == "int"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadPolicy(f"{field.name} must be a number, got {value!r}")
            if whole and not isinstance(value, int):
                raise BadPolicy(f"{field.name} must be a whole number, got {value!r}")
            if not math.isfinite(value) or value < lowest or (exclusive and value == lowest):
                bound = f"> {lowest}" if exclusive else f">= {lowest}"
                raise BadPolicy(f"{field.name} must be a finite number {bound}, got {value!r}")

    def to_args(self) -> dict[str, str]:
        """The fields as script arguments, by name."""
        return {
            name: value if isinstance(value, str) else repr(value)
            for name, value in asdict(self).items()
        }

    @classmethod
    def from_strings(cls, values: Mapping[str, str]) -> Policy:
        """A policy from its fields as stored in Redis."""
        kwargs: dict[str, int | float | str] = {}
        for field in fields(cls):
            raw = values[field.name]
            kinds = {"int": int, "float": float, "str": str}
            kwargs[field.name] = kinds[str(field.type)](raw)
        return cls(**kwargs)  # type: ignore[arg-type]
