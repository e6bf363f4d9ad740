"""What the stores opened on one client found out, for the next store opened on it.

A store checks three things when it opens: that the server has this version of the
function library (one FCALL_RO), its namespace's policy (a configure) and, once, the
server's maxmemory-policy (CONFIG GET). A session object made for each request (the
usual web-handler pattern) would send all three on every request: 6 commands a turn of
the OpenAI session instead of 3 (issue 38). So the first store on a client keeps what it
found here, per client object (weakly: it goes with the client), and a store opened
later on the same client takes it instead of asking again.

Each fact stays safe to take when it has gone stale since:
- the library's mode: a call that finds the library missing loads it and is sent
  again (memevict/registry.py);
- a namespace's seen and policy: every write carries the seen, and one the namespace no
  longer matches (lost, made again, its policy changed) is refused before it writes and
  sent again once the store has taken the namespace as it is (StoreBase._after);
- the maxmemory-policy: only a warning hangs on it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from memevict.policy import Policy

# Namespaces kept per client; the one opened least recently goes first.
NAMESPACES = 10_000


@dataclass
class ClientCache:
    """What stores found on one client."""

    # The mode a store's ensure_library chose, by (mode "auto", may load, node's name).
    modes: dict[tuple[bool, bool, str], str] = field(default_factory=dict)
    # The reply to CONFIG GET maxmemory-policy ({} if refused), None until asked.
    maxmemory: Any = None
    # A namespace's seen and policy, as a configure of a store on this client told last.
    namespaces: OrderedDict[str, tuple[str, Policy]] = field(default_factory=OrderedDict)

    def took(self, namespace: str, seen: str, policy: Policy) -> None:
        """A store took ``namespace`` as ``seen`` says, with ``policy`` in force."""
        self.namespaces[namespace] = (seen, policy)
        self.namespaces.move_to_end(namespace)
        if len(self.namespaces) > NAMESPACES:
            self.namespaces.popitem(last=False)

    def namespace(self, namespace: str) -> tuple[str, Policy] | None:
        return self.namespaces.get(namespace)

    def forget(self, namespace: str) -> None:
        """A store dropped ``namespace``: the next store configures it."""
        self.namespaces.pop(namespace, None)


_CACHES: weakref.WeakKeyDictionary[object, ClientCache] = weakref.WeakKeyDictionary()


def cache_of(client: object) -> ClientCache:
    """The cache of ``client`` (a new, empty one on its first store)."""
    cache = _CACHES.get(client)
    if cache is None:
        cache = _CACHES[client] = ClientCache()
    return cache
