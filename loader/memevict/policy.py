"""Policy: every number the eviction rules use, stored per namespace in Redis."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from memevict.errors import BadPolicy

# What recency is measured in (mirrors the 'word' field of POLICY in lua/lib/policy.lua).
CLOCKS = ("activity", "wall")
# Numbers: the range [lowest, highest] of each, in which every score, key and time
# stays finite and exact (docs/rules.md: Ranges); mirrors POLICY in lua/lib/policy.lua.
_MAX_INT = 2**53
RANGES: Mapping[str, tuple[float, float]] = {
    "max_hot": (1, _MAX_INT),
    "evict_batch": (0, 100),
    "half_life_memories": (0.001, 1e12),
    "half_life_s": (0.001, 1e12),
    "whitelist_boost": (1, 1e6),
    "whitelist_cap": (0, 200),
    "protect_s": (0, 1e9),
    "score_min": (0, 1e12),
    "jitter": (0, 1),
    "cold_max": (0, _MAX_INT),
    "retry_window_s": (0, 86400),
    "max_tokens": (0, _MAX_INT),
    "idle_ttl_s": (0, 1e9),
    "index": (0, 1),
    "protect_memories": (0, 1_000_000),
    "log_max": (0, 100_000),
}


def _shown(x: float) -> str:
    """A bound as the scripts print it: 1000000000000, 0.001."""
    return str(int(x)) if float(x).is_integer() else repr(x)


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
    max_tokens: most tokens (the sum of the hot memories' ``tokens``) in the hot
        tier before eviction starts; 0: no token budget.
    idle_ttl_s: seconds without a write after which the namespace expires with all
        its keys; 0: never.
    index: whether the namespace keeps a lexical index of its memories' terms, for
        search: 1 indexes every memory remembered with text from then on; 0 keeps
        none, and deletes one kept before.
    protect_memories: memories remembered in the namespace after a memory's first
        remember before it can be evicted (the newest ones are kept whatever their
        score, on either clock), at most a tenth of max_hot; 0: none.
    log_max: most entries of the namespace's eviction log (what left a tier, when and
        why: ``MemoryStore.evictions``), the newest kept; 0: no log.
    """

    max_hot: int = 100
    evict_batch: int = 0
    clock: str = "activity"
    half_life_memories: float = 10_000.0
    half_life_s: float = 1800.0
    whitelist_boost: float = 10.0
    whitelist_cap: int = 20
    protect_s: float = 30.0
    score_min: float = 0.1
    jitter: float = 0.001
    cold_max: int = 10_000
    retry_window_s: float = 60.0
    max_tokens: int = 0
    idle_ttl_s: float = 0.0
    index: int = 0
    protect_memories: int = 8
    log_max: int = 0

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise BadPolicy(f"clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        for field in fields(self):
            if field.name == "clock":
                continue
            value = getattr(self, field.name)
            lowest, highest = RANGES[field.name]
            whole = field.type == "int"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadPolicy(f"{field.name} must be a number, got {value!r}")
            if whole and not isinstance(value, int):
                raise BadPolicy(f"{field.name} must be a whole number, got {value!r}")
            if not (math.isfinite(value) and lowest <= value <= highest):
                kind = "whole number" if whole else "number"
                raise BadPolicy(
                    f"{field.name} must be a {kind} in [{_shown(lowest)}, {_shown(highest)}], "
                    f"got {value!r}"
                )

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
            try:
                kwargs[field.name] = kinds[str(field.type)](raw)
            except ValueError:  # (edited by hand)
                kind = {"int": "whole number", "float": "number"}.get(str(field.type), "word")
                raise BadPolicy(
                    f"the stored policy's {field.name} is {raw[:64]!r}, not a {kind}: a store "
                    "that may write restores it when it opens (memevict policy "
                    f"--{field.name.replace('_', '-')} VALUE sets it)"
                ) from None
        return cls(**kwargs)  # type: ignore[arg-type]


# Defaults changed since memevict 0.1.0: each field's default before (issue 40:
# benchmarks/RESULTS.md, "What was just said, held by activity"). A namespace made
# before keeps its stored policy; a Policy relying on the new defaults differs from it.
CHANGED_DEFAULTS: Mapping[str, float | int] = {"half_life_memories": 500.0, "protect_memories": 0}


def mismatch(namespace: str, stored: Policy, given: Policy) -> str:
    """Why a policy given for a namespace is not the stored one: the fields that
    differ, and those that hold a default from before it changed."""
    differ = [f.name for f in fields(Policy) if getattr(stored, f.name) != getattr(given, f.name)]
    shown = ", ".join(
        f"{name}={getattr(stored, name)!r} (given {getattr(given, name)!r})" for name in differ
    )
    text = (
        f"namespace {namespace!r} already has a policy that differs in {shown}; pass "
        "replace_policy=True to replace it, or adopt_policy=True to use it"
    )
    old = [
        name
        for name in differ
        if getattr(stored, name) == CHANGED_DEFAULTS.get(name)
        and getattr(given, name) == getattr(Policy(), name)
    ]
    if old:
        keep = ", ".join(f"{name}={CHANGED_DEFAULTS[name]!r}" for name in old)
        text += (
            f" ({', '.join(old)}: the namespace has the default from before memevict changed "
            f"it; give {keep} to keep what it has)"
        )
    return text


def field_docs() -> dict[str, str]:
    """Each field's line of the Policy docstring (its one description), by name."""
    docs: dict[str, str] = {}
    names = {f.name for f in fields(Policy)}
    current = None
    for line in (Policy.__doc__ or "").splitlines():
        head, _, rest = line.strip().partition(": ")
        if head in names and rest:
            current = head
            docs[current] = rest
        elif current and line.startswith("        ") and line.strip():
            docs[current] += " " + line.strip()
        else:
            current = None
    return docs
