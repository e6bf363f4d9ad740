"""The baselines a context that recalls is measured against, worked out without a server.

A conversation is a sequence of messages, each ``(id, text)``, oldest first; a context is
the ids of the messages it holds, in conversation order, within a token budget
(``tokens_of(text)`` a message's cost). Three ways to fill it:

- :func:`fifo`: the newest messages that fit, stopping at the first that does not (what
  a chat history cut to the budget holds);
- :func:`search_alone`: the messages that best match a query, best first, each taken if
  it fits in what is left (the next tried if not), until none is left;
- :func:`fifo_slice`: FIFO in ``1 - share`` of the budget, then the best matches among
  the older messages in what FIFO left (the ``share`` and FIFO's unused room).

Relevance is the store's (lua/lib/index.lua): BM25 with each term counted once per
message and no length normalisation (b = 0), the terms made by :mod:`memevict.terms`. A
message's relevance is the sum, over the query's terms it holds, of
``ln(1 + (N - n + 0.5) / (n + 0.5))``, where N is the number of messages with a term and n
the number holding that term; a message holding none of the query's terms is no match.
Ties go to the newer message, as the store's search orders them. Unlike the store's
recall, there is no relevance floor: any match counts.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence

from memevict.terms import query_terms, terms

Message = tuple[str, str]  # (id, text)
TokenCounter = Callable[[str], int]


@functools.lru_cache(maxsize=1 << 16)
def _terms_of(text: str) -> frozenset[str]:
    """A message's terms (cached: a replay asks about the same messages many times)."""
    return frozenset(terms(text))


def relevance(messages: Sequence[Message], query: str) -> dict[str, float]:
    """The BM25 relevance (b = 0) of every message that holds a term of ``query``, by id."""
    held = [_terms_of(text) for _, text in messages]
    indexed = sum(bool(found) for found in held)  # N: the messages with a term
    holding = Counter(term for found in held for term in found)
    # The query's terms any message holds, the rarest first (the order the store adds them).
    wanted = sorted((t for t in query_terms(query) if holding[t]), key=lambda t: holding[t])
    idf = {
        t: math.log(1 + (max(indexed - holding[t], 0) + 0.5) / (holding[t] + 0.5)) for t in wanted
    }
    found: dict[str, float] = {}
    for (id, _), own in zip(messages, held, strict=True):
        matched = [t for t in wanted if t in own]
        if matched:
            found[id] = sum(idf[t] for t in matched)
    return found


def fifo(messages: Sequence[Message], budget: int, tokens_of: TokenCounter) -> list[str]:
    """The newest messages whose tokens fit in ``budget`` together, in conversation order."""
    kept: list[str] = []
    used = 0
    for id, text in reversed(messages):
        used += tokens_of(text)
        if used > budget:
            break
        kept.append(id)
    return kept[::-1]


def _best(
    messages: Sequence[Message],
    scores: dict[str, float],
    budget: int,
    tokens_of: TokenCounter,
) -> list[str]:
    """The messages with a score, best first (ties: the newer), each taken while it fits."""
    position = {id: i for i, (id, _) in enumerate(messages)}
    cost = {id: tokens_of(text) for id, text in messages}
    taken: list[str] = []
    left = budget
    for id in sorted(scores, key=lambda id: (-scores[id], -position[id])):
        if cost[id] <= left:
            taken.append(id)
            left -= cost[id]
    return taken


def _in_order(messages: Sequence[Message], ids: set[str]) -> list[str]:
    return [id for id, _ in messages if id in ids]


def search_alone(
    messages: Sequence[Message], query: str, budget: int, tokens_of: TokenCounter
) -> list[str]:
    """Search over every message: the best matches of ``query`` (BM25 as the store's
    index ranks them), best first, each taken if it fits in what is left of ``budget``;
    the ids in conversation order. Messages that match nothing are not taken, so the
    budget may be left partly empty."""
    chosen = _best(messages, relevance(messages, query), budget, tokens_of)
    return _in_order(messages, set(chosen))


def fifo_slice(
    messages: Sequence[Message],
    query: str,
    budget: int,
    share: float,
    tokens_of: TokenCounter,
) -> list[str]:
    """FIFO with a matching slice: the newest messages that fit in ``budget`` less
    ``round(share * budget)`` tokens, then the best matches of ``query`` among the older
    messages (relevance over every message, as one index holds them all), each taken if
    it fits in what FIFO left of ``budget``; the ids in conversation order. ``share`` in
    [0, 1]; 0 is FIFO of the whole budget."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share!r}")
    recent = fifo(messages, budget - round(share * budget), tokens_of)
    older = messages[: len(messages) - len(recent)]
    used = sum(tokens_of(text) for _, text in messages[len(older) :])
    scores = relevance(messages, query)
    older_scores = {id: scores[id] for id, _ in older if id in scores}
    matched = _best(older, older_scores, budget - used, tokens_of)
    return _in_order(messages, {*recent, *matched})
