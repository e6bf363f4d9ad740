"""MemoryStore: the typed Python face of the Lua scripts, one EVALSHA per method."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import redis
from redis.exceptions import NoScriptError, ResponseError

from memevict import commands
from memevict.commands import Call, Item
from memevict.errors import BadPolicy, NoPolicy, PolicyMismatch, from_response
from memevict.policy import Policy
from memevict.results import Batch, Evicted, Memory, Remembered, Stats
from memevict.scripts import RECEIPT, ArgValue, ScriptSpec, key_name, specs

T = TypeVar("T")


class ScriptRegistry:
    """The package's scripts on one client.

    A call is one EVALSHA (EVALSHA_RO for the read-only scripts, so replicas
    and read-only ACL users can serve them). After NOSCRIPT (a restart, SCRIPT
    FLUSH) it sends the source with EVAL, which runs the script and caches it
    again in the same round trip, so a flush racing the call cannot fail it.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.specs: dict[str, ScriptSpec] = dict(specs())
        self._client = client

    def load(self) -> dict[str, str]:
        """SCRIPT LOAD every script now; returns name -> SHA1."""
        try:
            return {name: self._client.script_load(s.source) for name, s in self.specs.items()}
        except ResponseError as error:
            raise from_response(error) from None

    def run(self, spec: ScriptSpec, keys: Sequence[str], args: Sequence[ArgValue]) -> Any:
        client = self._client
        if spec.read_only:
            try:
                return client.evalsha_ro(spec.sha, len(keys), *keys, *args)
            except NoScriptError:
                return client.eval_ro(spec.source, len(keys), *keys, *args)
        try:
            return client.evalsha(spec.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(spec.source, len(keys), *keys, *args)


class MemoryStore:
    """One namespace of memories in Redis.

    The namespace's policy is stored in Redis so every worker sharing it uses
    the same parameters. Without ``policy`` the store uses the stored one (the
    defaults if the namespace is new). With a ``policy`` that differs from the
    stored one it raises :class:`PolicyMismatch`, unless ``replace_policy``.

    With ``read_only=True`` (a client of a read replica) the store writes
    nothing: it reads the stored policy instead of configuring, ``get``,
    ``top`` and ``stats`` work, and the server refuses writes (:class:`ReadOnly`).
    """

    def __init__(
        self,
        client: redis.Redis,
        namespace: str = "default",
        policy: Policy | None = None,
        *,
        replace_policy: bool = False,
        read_only: bool = False,
    ) -> None:
        self.namespace = commands.check_namespace(namespace)
        self.client = client
        self.read_only = read_only
        self.registry = ScriptRegistry(client)
        self._keys = {name: spec.key_names(namespace) for name, spec in self.registry.specs.items()}
        self._receipt_at = {
            name: spec.keys.index(RECEIPT)
            for name, spec in self.registry.specs.items()
            if RECEIPT in spec.keys
        }
        if read_only:
            self.policy = self._stored_policy()
        else:
            self.policy = self._configure(policy, replace_policy)

    def _send(self, call: Call[T]) -> T:
        spec = self.registry.specs[call.script]
        keys = self._keys[call.script]
        if call.call:  # the receipt key is <prefix>call:<call id>
            keys = list(keys)
            keys[self._receipt_at[call.script]] += call.call
        try:
            reply = self.registry.run(spec, keys, spec.argv(call.args))
        except ResponseError as error:
            raise from_response(error) from None
        return call.parse(reply)

    def _run(self, call: Call[T]) -> T:
        try:
            return self._send(call)
        except NoPolicy:
            if self.read_only:
                raise
            # The namespace's keys were deleted (FLUSHDB, a restart without
            # persistence): store this store's policy again and retry once.
            # Scripts check the policy before any write, so nothing ran.
            self._configure(self.policy, False)
            return self._send(call)

    def _configure(self, policy: Policy | None, replace: bool, now: int | None = None) -> Policy:
        wanted = policy if policy is not None else Policy()
        _, stored = self._send(commands.configure(wanted, replace=replace, now=now))
        if policy is not None and stored != policy:
            raise PolicyMismatch(
                f"namespace {self.namespace!r} already has policy {stored}; "
                "pass replace_policy=True to replace it"
            )
        return stored

    def _stored_policy(self) -> Policy:
        names = list(Policy.__dataclass_fields__)
        try:
            values = self.client.hmget(key_name(self.namespace, "policy"), names)
        except ResponseError as error:
            raise from_response(error) from None
        stored = {
            n: commands.as_text(v) for n, v in zip(names, values, strict=True) if v is not None
        }
        if len(stored) != len(names):
            raise NoPolicy(f"namespace {self.namespace!r} has no policy")
        return Policy.from_strings(stored)

    def set_policy(self, policy: Policy, *, now: int | None = None) -> Policy:
        """Replaces the namespace's stored policy for every worker, from ``now``
        on: a new half_life_s changes how fast recency falls from then."""
        if policy is None:  # None means "the stored one" only to the constructor
            raise BadPolicy("set_policy needs a Policy, got None")
        self.policy = self._configure(policy, True, now)
        return self.policy

    def remember(
        self,
        id: str,
        importance: float,
        *,
        text: str | None = None,
        whitelist: bool = False,
        now: int | None = None,
    ) -> Remembered:
        """Adds or updates a memory, evicting the lowest if the hot tier is over max_hot."""
        return self._run(commands.remember(id, importance, text=text, whitelist=whitelist, now=now))

    def remember_many(
        self, items: Sequence[Item | tuple[str, float]], *, now: int | None = None
    ) -> Batch:
        """Remembers up to 1000 memories in one atomic call, as if one by one
        at the same now, then evicts once; items are Item or (id, importance)."""
        return self._run(commands.remember_many(items, now=now))

    def touch(self, id: str, *, now: int | None = None) -> Remembered | None:
        """Marks a hot memory as used now (evicting if that made the hot tier
        too full); None if it is cold or unknown."""
        return self._run(commands.touch(id, now=now))

    def decay(self, rate: float) -> None:
        """Multiplies every non-whitelisted hot score by rate (0 < rate <= 1), in O(1)."""
        self._run(commands.decay(rate))

    def evict(self, *, now: int | None = None) -> Evicted:
        """Evicts down to max_hot (plus evict_batch) if the hot tier is over it."""
        return self._run(commands.evict(now=now))

    def whitelist(self, id: str, *, now: int | None = None) -> Remembered:
        """Whitelists a memory (recalling it if cold); raises NotFound for an unknown id."""
        return self._run(commands.whitelist(id, now=now))

    def demote(self, id: str, *, now: int | None = None) -> Remembered:
        """Makes a whitelisted memory ordinary (``demoted == (id,)``), evicting if that
        made the hot tier too full; ``demoted`` is empty if it was not whitelisted."""
        return self._run(commands.demote(id, now=now))

    def recall(self, id: str, *, now: int | None = None) -> Remembered:
        """Brings a cold memory back to hot (or refreshes a hot one); NotFound if unknown."""
        return self._run(commands.recall(id, now=now))

    def forget(self, id: str) -> bool:
        """Deletes a memory everywhere; False if it was unknown."""
        return self._run(commands.forget(id))

    def get(self, id: str, *, now: int | None = None) -> Memory | None:
        """One memory, hot or cold, or None."""
        return self._run(commands.get(id, now=now))

    def top(self, k: int, *, now: int | None = None) -> list[Memory]:
        """The k highest-scored hot memories, highest first."""
        return self._run(commands.top(k, now=now))

    def stats(self, *, now: int | None = None) -> Stats:
        """Counts of hot, cold, whitelisted and protected memories."""
        return self._run(commands.stats(now=now))
