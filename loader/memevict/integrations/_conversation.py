"""What every framework adapter shares: a conversation's items as memories.

An adapter turns each item of its framework (a message, a tool call, a tool result) into
an :class:`Entry`: a stable id, the item serialized as text, what the labeler reads, and
the group that links it to the items it must travel with (a tool call and its result).
:class:`Conversation` (and :class:`AsyncConversation`) remember new entries, with an
importance from a labeler and a token cost from a counter, in a namespace whose policy
keeps the hot tier within the token budget; the evicted stay in the cold tier, recallable.
The prompt is :meth:`Conversation.window`: the window (highest-ranked whole groups that fit,
in time order), with the current turn (``tail``) always in it.

Sync and async share everything but the store calls: the logic is written once, as
generators of store calls (:data:`Steps`) that :func:`run_steps` calls and
:func:`arun_steps` awaits.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Callable, Container, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar, cast

from memevict.aio import AsyncMemoryStore
from memevict.commands import MAX_BATCH, MAX_SEARCH, MAX_SKIP, Item, check_namespace
from memevict.commands import MAX_TOKENS as MAX_MEMORY_TOKENS
from memevict.errors import BadArgument, BadNamespace, NamespaceLost, PermissionDenied
from memevict.importance import Labeler, Message
from memevict.labelers import aimportances_of, importances_of
from memevict.policy import Policy
from memevict.results import Batch, Context, Match, Memory, Version
from memevict.store import MemoryStore
from memevict.terms import CALL_TERMS, query_terms, terms

TokenCounter = Callable[[str], int]
# Called with the namespace when an adapter finds it lost (see BaseConversation._lost).
OnLost = Callable[[str], object]
# Called with the namespace and (id, stored text) of each memory a write of the
# conversation evicted from the hot tier, in the order they left (text None for one stored
# without): the adapters turn them into their messages for a user's summariser
# (BaseConversation._hand_over).
OnEvicted = Callable[[str, list[tuple[str, str | None]]], object]

log = logging.getLogger("memevict.integrations")

MAX_TOKENS = 8000  # the adapters' default budget
RECENT = 4  # the messages before the current turn sent whatever their rank, while they fit
# The newest memories MemevictSession's namespaces protect by activity (protect_memories):
# its RECENT messages, and the remembers among them that are not new (a question lifted
# when its answer comes counts as one: docs/rules.md, rule 5). So they stay hot, the hot
# tier less them is the window, and a turn is served from the hot tier held (Held). The
# other adapters read the window before they store the turn, which the server then ranks
# (the turn's room): protection would cost their writes and serve nothing.
PROTECTED = RECENT + 2
# The hot tier is bounded by tokens; this only keeps a count bound out of the way.
MAX_HOT = 100_000
# Recency's half-life, in memories remembered in the conversation (see HISTORY.md:
# coverage on real conversations rises with it; the current turn is always sent).
HALF_LIFE_MEMORIES = 2000.0
# A user's message ranks this far below what answers it, at least (see _items): up to
# the answer's importance, the questions take budget the answers need (HISTORY.md). A tool
# exchange it caused (a group: the call and its result) lifts it to the exchange's own
# importance: a tool call kept is kept with the request that explains it.
ASKED_BELOW = 2.0

PIN_AT = 10.0  # the importance of an instruction (memevict.importance.CATEGORIES)
# An item over the whole budget is remembered at this importance, alone, so that it goes
# straight to the cold tier (recallable) without evicting anything else.
OVER_BUDGET_IMPORTANCE = 1e-6
# token_weight: a message of at most this many tokens keeps its importance, a longer one
# loses some, by (WEIGHED_AT / tokens) ** token_weight; TOKEN_WEIGHT is the adapters'
# default (issue 40: benchmarks/RESULTS.md, "Value per token").
WEIGHED_AT = 25
TOKEN_WEIGHT = 0.35
_KNOWN = 10_000  # ids an adapter remembers having stored, per conversation


def approx_tokens(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English text with
    OpenAI's and Anthropic's tokenizers; at least 1. Pass your tokenizer's count for
    exact budgets (``lambda text: len(encoding.encode(text))`` with tiktoken)."""
    return max(1, (len(text) + 3) // 4)


def sha256_of(text: str) -> str:
    """The hex SHA-256 of ``text`` in UTF-8 (a lone surrogate as it is)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


HASHED = "sha256:"  # what starts a name made of a hash (see hashed_name)


def fits(value: str, max_bytes: int) -> bool:
    """Whether memevict takes ``value`` as an id or a group: 1..max_bytes of UTF-8, no NUL
    (a lone surrogate is not UTF-8)."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return 1 <= len(raw) <= max_bytes and b"\0" not in raw


def hashed_name(prefix: str, value: str, takes: Callable[[str], bool]) -> str:
    """``prefix`` and ``value``, or ``prefix`` and ``sha256:<hex of value>`` where memevict
    does not ``take`` that name, or where ``value`` itself starts with ``sha256:``: so no
    two values get the same name (a value ``sha256:<hex>`` is hashed too, instead of
    standing for the value whose hash it looks like)."""
    name = f"{prefix}{value}"
    if not value.startswith(HASHED) and takes(name):
        return name
    return f"{prefix}{HASHED}{sha256_of(value)}"


def _is_namespace(name: str) -> bool:
    try:
        check_namespace(name)
    except BadNamespace:
        return False
    return True


def namespace_for(framework: str, session_id: str) -> str:
    """The namespace of a session: ``<framework>:<session_id>``, or
    ``<framework>:sha256:<hex of the id>`` when that is not a namespace memevict takes
    (spaces, braces, ``*?[]\\``, unprintable characters, a namespace over 256 bytes) or
    when the id itself starts with ``sha256:``; so two ids never share a namespace."""
    if not isinstance(session_id, str):
        raise BadArgument(f"session_id must be a string, got {session_id!r}")
    return hashed_name(f"{framework}:", session_id, _is_namespace)


def conversation_policy(max_tokens: int, **changes: float | int | str) -> Policy:
    """The policy of an adapter's namespace: the hot tier (what the model sees) holds at
    most ``max_tokens`` tokens; no memory is protected (protect_s and protect_memories
    0: the adapter itself sends what was just said; MemevictSession protects its recent
    messages: PROTECTED); recency on the activity clock (a conversation ages by its own
    messages, not by the wall clock); a lexical index, for the window's recall of what
    matches the latest user message. ``changes``: any other Policy field."""
    fields: dict[str, float | int | str] = {
        "max_hot": MAX_HOT,
        "max_tokens": max_tokens,
        "protect_s": 0.0,
        "protect_memories": 0,
        "clock": "activity",
        "half_life_memories": HALF_LIFE_MEMORIES,
        "index": 1,
    }
    fields.update(changes)
    return Policy(**fields)  # type: ignore[arg-type]


def check_one_of(what: str, url: str | None, client: object, store: object) -> None:
    """Raises BadArgument unless exactly one of url, client and store is given."""
    given = [n for n, v in (("url", url), ("client", client), ("store", store)) if v is not None]
    if len(given) != 1:
        raise BadArgument(f"give {what} one of url, client or store, got {given or 'none'}")


@dataclass(frozen=True, slots=True)
class Settings:
    """What an adapter makes its conversations with, from its constructor's arguments:
    the prompt's budget ``max_tokens`` and the other Policy fields (``policy``), applied
    to the namespace if its stored policy differs; the ``labeler``, the ``count_tokens``
    of the text the model reads, and ``pin_at`` (see :class:`Conversation`); ``on_lost``,
    called with the namespace when the conversation finds it lost (:class:`Conversation`);
    ``on_evicted``, given what each of its writes evicted (:data:`OnEvicted`)."""

    max_tokens: int
    policy: Mapping[str, float | int | str]
    labeler: Labeler
    count_tokens: TokenCounter
    pin_at: float
    on_lost: OnLost | None = None
    # The share of the window's budget that memories matching the latest user message
    # fill (memevict.commands.recall_share's when None; 0: none, and no index kept).
    recall_share: float | None = None
    # How much a message's length lowers its rank (see BaseConversation._weighted): 0,
    # importance alone; 1, importance per token.
    token_weight: float = TOKEN_WEIGHT
    on_evicted: OnEvicted | None = None

    def namespace_policy(self) -> Policy:
        """The policy of a namespace the adapter creates (:func:`conversation_policy`)."""
        index = 0 if self.recall_share == 0 else 1
        return conversation_policy(self.max_tokens, **{"index": index, **self.policy})


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of a conversation, ready to be remembered."""

    id: str  # stable: the same item always gets the same id
    text: str  # the item serialized, as the adapter reads it back
    message: Message  # what the labeler reads; its text is what count_tokens counts
    group: str | None = None  # items of one group are kept or evicted together
    # What changes when the item is edited under the same id (None: it never is): an
    # entry whose digest differs from the one stored is remembered again (its new cost).
    digest: object = None


def _batches(items: Sequence[Item]) -> Iterable[Sequence[Item]]:
    """``items`` in calls of at most MAX_BATCH items and CALL_TERMS terms (a call with
    more would cut its texts' terms: memevict.terms.fitted)."""
    batch: list[Item] = []
    count = 0
    for item in items:
        found = len(item.terms or ())
        if batch and (len(batch) == MAX_BATCH or count + found > CALL_TERMS):
            yield batch
            batch, count = [], 0
        batch.append(item)
        count += found
    if batch:
        yield batch


def with_groups(entries: Sequence[Entry], chosen: Container[int]) -> list[Entry]:
    """The entries at the indexes ``chosen``, with the other members of their groups
    among ``entries``, in order."""
    groups = {e.group for i, e in enumerate(entries) if i in chosen} - {None}
    return [e for i, e in enumerate(entries) if i in chosen or e.group in groups]


def without(entries: Sequence[Entry], others: Iterable[Entry]) -> list[Entry]:
    """``entries`` less those whose id is one of ``others``'."""
    ids = {e.id for e in others}
    return [e for e in entries if e.id not in ids]


def recent_of(entries: Sequence[Entry], n: int) -> list[Entry]:
    """The last ``n`` of ``entries`` (the messages before the current turn, oldest first),
    with the other members of their groups among ``entries``: what was just said."""
    return with_groups(entries, range(max(0, len(entries) - n), len(entries)))


def _units(entries: Sequence[Entry]) -> list[list[Entry]]:
    """``entries`` as units that go together (a group whole), by their newest member."""
    units: dict[str, list[Entry]] = {}
    for e in entries:
        unit = units.pop(e.group if e.group is not None else f"\0{e.id}", [])
        units[e.group if e.group is not None else f"\0{e.id}"] = [*unit, e]
    return list(units.values())


def _skip(first: Sequence[Entry]) -> list[str]:
    """The ids the window leaves out: what is sent anyway, so that the budget left for
    the window is not spent on them twice (the newest MAX_SKIP; the hot tier then
    usually fits, which the window takes whole without ranking it)."""
    return [e.id for e in first[-MAX_SKIP:]]


def _compose(window: Context | None, first: Sequence[Entry]) -> list[tuple[str, str]]:
    """The window's (id, text) in the order first remembered, then those of ``first`` (the
    recent entries and the current turn, newer than the rest) that it does not hold."""
    history = [] if window is None else [(id, text or "") for id, text in window]
    held = {id for id, _ in history}
    return history + [(e.id, e.text) for e in first if e.id not in held]


@dataclass(frozen=True, slots=True)
class Held:
    """The hot tier of a namespace as it was at one version (``epoch``, ``version``): each
    memory's (order, text, tokens), by order. Read whole from the server (:meth:`of`,
    a ``context`` of the whole tier with ``detail``), then followed through the replies
    of this conversation's own writes (:meth:`after`), each of which names the version
    it made, the version before it plus one: a write that finds the namespace at the
    version held makes the next. Any other write (another worker's, a pop, a policy
    change) makes a version this one never reaches, and it is read whole again. A Held
    is never changed (a write makes a new one), so a task that reads one while another
    writes reads a whole tier of one version. What it serves (:meth:`window`) is what
    ``context`` returns at that version, by the window's own rule: when the hot tier
    less the skipped fits the budget, the window is all of it, in the order first
    remembered (lua/lib/window.lua)."""

    epoch: int
    version: int
    memories: dict[str, tuple[int, str | None, int]]
    tokens: int  # of them all

    @classmethod
    def of(cls, whole: Context) -> Held | None:
        """What a context of the whole hot tier (no skip, no query, left 0, with detail)
        holds; None where orders repeat (a namespace of memevict 0.1.0: the window then
        orders by creation, which is not held)."""
        if whole.left != 0 or whole.recalled or len(whole.orders) != len(whole.items):
            return None
        rows = zip(whole.items, whole.orders, whole.sizes, strict=True)
        memories = {id: (order, text, tokens) for (id, text), order, tokens in rows}
        if len({m[0] for m in memories.values()}) != len(whole.items) or 0 in whole.orders:
            return None
        return cls(whole.epoch, whole.version, memories, sum(whole.sizes))

    def after(self, items: Sequence[Item], done: Batch) -> Held | None:
        """The hot tier after a remember_many of ``items`` did ``done``, a new Held (this
        one is left as it is, for whoever reads it meanwhile); None unless the call wrote
        to the version held and moved nothing else (no group brought back)."""
        if done.version != self.version + 1 or done.moved or 0 in done.orders:
            return None
        memories, tokens = dict(self.memories), self.tokens
        last = next(reversed(memories.values()))[0] if memories else 0  # (in order)
        resort = False
        for item, order in zip(items, done.orders, strict=True):
            held = memories.get(item.id)
            text = item.text if item.text is not None or held is None else held[1]
            memories[item.id] = (order, text, item.tokens)
            tokens += item.tokens - (held[2] if held else 0)
            resort = resort or (held is None and order < last)
            last = max(last, order)
        for id in done.evicted:
            gone = memories.pop(id, None)
            tokens -= gone[2] if gone else 0
        if resort:  # (a memory back from the cold tier keeps its place)
            memories = dict(sorted(memories.items(), key=lambda m: m[1][0]))
        return Held(self.epoch, done.version, memories, tokens)

    def window(self, budget: int, skip: Sequence[str], now: Version) -> Context | None:
        """``context(budget, skip=skip)`` at the version ``now`` read, where this is that
        version and the whole hot tier less ``skip`` fits ``budget`` (in tokens, and one
        token a memory at least); None otherwise (the server ranks it)."""
        if (now.epoch, now.version) != (self.epoch, self.version):
            return None
        memories, left_out, total = self.memories, set(skip), self.tokens
        skipped = [memories[id][2] for id in left_out if id in memories]
        if total != now.tokens or total - sum(skipped) > budget:
            return None  # (a state's total that is off: the server ranks the tier)
        if len(memories) - len(skipped) > budget:
            return None
        items = tuple((id, m[1]) for id, m in memories.items() if id not in left_out)
        return Context(items, total - sum(skipped), 0, self.epoch, (), self.version)


class _Known:
    """The ids this process has seen stored, with their entries' digests, so that items
    passed again (a framework resends the whole history on every call) are not
    remembered again, unless edited (another digest)."""

    def __init__(self) -> None:
        self._ids: dict[str, object] = {}

    def __contains__(self, id: object) -> bool:
        return id in self._ids

    def get(self, id: str, default: object = None) -> object:
        """The digest of the entry stored as ``id`` (``default`` if it is not known)."""
        return self._ids.get(id, default)

    def holds(self, entry: Entry) -> bool:
        """Whether ``entry`` is known as it is (the same id and digest)."""
        return entry.id in self._ids and self._ids[entry.id] == entry.digest

    def add(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            self._ids[e.id] = e.digest
        while len(self._ids) > _KNOWN:
            del self._ids[next(iter(self._ids))]

    def discard(self, id: str) -> None:
        self._ids.pop(id, None)

    def clear(self) -> None:
        self._ids.clear()

    def order(self) -> dict[str, int]:
        """The place of each known id in the order this process stored them."""
        return {id: n for n, id in enumerate(self._ids)}


# --- recall_memory: the tool each adapter offers the model ---------------------------

RECALL_TOOL = "recall_memory"
# The tool's docstring: what the model reads of it (its description and its argument's).
RECALL_DOC = (
    "Search the earlier messages of this conversation, including ones no longer in your "
    "context, by their words. Returns the best matches, oldest first, each with who said it."
    "\n\nArgs:\n    query: a few distinctive words of what to look for: a name, a number, "
    "a topic.\n"
)
RECALL_K = 5  # the messages a call returns at most, by default
RECALL_TOKENS = 1000  # the tokens of its answer at most (count_tokens), by default
# Every answer starts with one of these.
_FOUND, _NONE = "Earlier messages of this conversation ", "No earlier message of this conversation "
RECALL_OFF = (
    f"{_NONE}can be searched: its adapter was made with recall_share=0, so its messages "
    "are not indexed."
)
_QUERY_CHARS = 2000  # of a query, what is read (a query keeps 32 terms anyway)
_SHOWN = 80  # of a query, what an answer repeats
# A match over what is left of the cap is cut to it, if that is this many tokens at least.
_CUT_AT_LEAST = 20
# A stored text as what the model read of it: an adapter's own decoding (None: a text
# it did not write, such as an operator's note).
Reader = Callable[[str], Message | None]


def check_recall(k: int, max_tokens: int) -> None:
    """Raises BadArgument unless ``k`` is in 1..100 and ``max_tokens`` at least 100."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEARCH:
        raise BadArgument(f"k must be a whole number in [1, {MAX_SEARCH}], got {k!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 100:
        raise BadArgument(f"max_tokens must be a whole number of 100 or more, got {max_tokens!r}")


def is_tool(message: Message) -> bool:
    """Whether ``message`` is a tool call (kind ``*_call``: function_call, and the other
    tools' calls the OpenAI SDK names so) or a tool's result (kind ``*_output``), as every
    adapter's ``message_of`` gives them."""
    return (message.kind or "").endswith(("_call", "_output"))


def _shown(query: str) -> str:
    """A query as an answer repeats it: its start, quoted, an unprintable character as ?
    (and so never a lone surrogate, which a framework could not send as JSON)."""
    start = "".join(c if c.isprintable() else "?" for c in query[:_SHOWN])
    return repr(start + ("..." if len(query) > _SHOWN else ""))


def _line(message: Message) -> str:
    """A message as one item of the answer: who said it, and its text."""
    who = message.role or ("tool" if (message.kind or "").endswith("_output") else "assistant")
    return f"- {who}: " + message.text.replace("\n", "\n  ")


def _cut(line: str, tokens: int, count: TokenCounter) -> str:
    """The longest start of ``line`` that costs at most ``tokens`` with its mark."""
    low, high = 0, len(line)
    while low < high:
        mid = (low + high + 1) // 2
        if count(f"\n{line[:mid]} [cut]") <= tokens:
            low = mid
        else:
            high = mid - 1
    return f"{line[:low]} [cut]"


def recall_text(
    shown: str,
    matches: Sequence[Match],
    read: Reader,
    count: TokenCounter,
    max_tokens: int,
    order: Mapping[str, int],
) -> str:
    """The answer of ``recall_memory``: the ``matches`` an adapter wrote (``read``), the
    best that fit ``max_tokens`` tokens (the last one that does not fit cut to what is
    left), in conversation order: by the time stored, then, within a millisecond, by
    ``order`` (this process's), then by id."""
    found = []
    for match in matches:
        message = None if match.memory.text is None else read(match.memory.text)
        if message is not None:
            found.append((match.memory, _line(message)))
    if not found:
        return f"{_NONE}matches {shown}."
    head = f"{_FOUND}matching {shown}, oldest first:"
    more = "\n({} more matches left out for length: search with other words for them)"
    left = max_tokens - count(head) - count(more.format(len(found)))
    chosen: list[tuple[Memory, str]] = []
    for memory, line in found:  # best first
        if count(f"\n{line}") > left:
            if left >= _CUT_AT_LEAST:
                chosen.append((memory, _cut(line, left, count)))
            break
        chosen.append((memory, line))
        left -= count(f"\n{line}")
    chosen.sort(key=lambda c: (c[0].created, order.get(c[0].id, len(order)), c[0].id))
    lines = [head, *(line for _, line in chosen)]
    if len(chosen) < len(found):
        lines.append(more.format(len(found) - len(chosen))[1:])
    return "\n".join(lines)


StoreT = TypeVar("StoreT", MemoryStore, AsyncMemoryStore)
T = TypeVar("T")
B = TypeVar("B", bound="BaseConversation[Any]")

# One store call of the logic sync and async share: :func:`run_steps` calls it for its
# answer, :func:`arun_steps` awaits what it returns. The logic is a generator of them
# (Steps) that gets each answer back, or the error raised, where it yielded the call.
Step = Callable[[], Any]
Steps = Generator[Step, Any, T]


@dataclass(slots=True)
class _Outcome:
    """A step's answer or error; once the steps are done, their result (``answer``)."""

    answer: Any = None
    error: BaseException | None = None

    def resume(self, steps: Steps[Any]) -> Step | None:
        """The next step of ``steps``, this outcome sent (or raised) into them; None once
        they are done."""
        try:
            return steps.send(self.answer) if self.error is None else steps.throw(self.error)
        except StopIteration as done:
            self.answer, self.error = done.value, None
            return None


def _called(step: Step) -> _Outcome:
    try:
        return _Outcome(step())
    except BaseException as error:
        return _Outcome(error=error)


async def _awaited(step: Step) -> _Outcome:
    try:
        return _Outcome(await step())
    except BaseException as error:
        return _Outcome(error=error)


def run_steps(steps: Steps[T]) -> T:
    """The result of ``steps`` on a :class:`~memevict.MemoryStore` (each step called)."""
    outcome = _Outcome()
    while (step := outcome.resume(steps)) is not None:
        outcome = _called(step)
    return cast(T, outcome.answer)


async def arun_steps(steps: Steps[T]) -> T:
    """The result of ``steps`` on an :class:`~memevict.aio.AsyncMemoryStore` (each step
    awaited)."""
    outcome = _Outcome()
    while (step := outcome.resume(steps)) is not None:
        outcome = await _awaited(step)
    return cast(T, outcome.answer)


def _call(step: Step) -> Steps[Any]:
    """The steps of one store call: its answer."""
    return (yield step)


class BaseConversation(Generic[StoreT]):
    """What :class:`Conversation` and :class:`AsyncConversation` share: all of it, the
    store calls as :data:`Steps`."""

    def __init__(self, store: StoreT, settings: Settings) -> None:
        self.store: StoreT = store
        self.settings = settings
        self.max_tokens = settings.max_tokens
        self.labeler, self.count_tokens = settings.labeler, settings.count_tokens
        self.pin_at = settings.pin_at
        # The policy given in code: applied to the namespace (settle) if it differs.
        policy = settings.namespace_policy()  # (BadPolicy here, not later)
        share = settings.recall_share
        if share is not None and (
            isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1
        ):
            raise BadArgument(f"recall_share must be None or a number in [0, 1], got {share!r}")
        weight = settings.token_weight
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
            raise BadArgument(f"token_weight must be a number in [0, 1], got {weight!r}")
        self._wanted: dict[str, float | int | str] = {
            "max_tokens": settings.max_tokens,
            "index": policy.index,
            "protect_memories": policy.protect_memories,
            **settings.policy,
        }
        self._settled = False
        self._known = _Known()
        self._epoch: int | None = None  # of the namespace, as the last window saw it
        # The hot tier as of a version, kept from this conversation's own writes; None:
        # not held (read whole at the next window). See Held.
        self._held: Held | None = None
        self._no_version = False  # (the user may not read it: every window by context)
        self._asked: Item | None = None  # the latest user message, as last remembered
        self.losses = 0  # the times this conversation found its namespace lost
        self._loss_noted = False  # (a loss met by a call, before the next window)
        self._foreign_noted = False

    def fresh(self: B) -> B:
        """A new conversation on the same store with the same settings, knowing nothing."""
        return type(self)(self.store, self.settings)

    @property
    def known(self) -> _Known:
        """Ids this conversation has stored or found stored (the newest 10,000), with
        their entries' digests."""
        return self._known

    def forget_asked(self, id: str) -> None:
        """Forgets that ``id`` was stored (removed: a pop), so that it is not remembered
        again as the question of a later answer."""
        self._known.discard(id)
        if self._asked is not None and self._asked.id == id:
            self._asked = None

    def note_foreign(self, ids: Sequence[str]) -> None:
        """Logs, once per conversation, memories of the namespace the adapter did not
        write (an operator's ``memevict remember``), which it leaves out of the prompt."""
        if ids and not self._foreign_noted:
            self._foreign_noted = True
            log.warning(
                "memevict: namespace %r holds memories this adapter did not write (%s): "
                "left out of the prompt (said once)",
                self.store.namespace,
                ", ".join(repr(id) for id in ids[:3]),
            )

    def _importances(self, messages: list[Message]) -> Any:
        """The labeler's importances of ``messages`` (awaitable in an async conversation)."""
        raise NotImplementedError

    def _hand_over(self, hook: OnEvicted, evicted: list[tuple[str, str | None]]) -> Any:
        """Calls ``hook`` with what a write evicted (awaitable in an async conversation).
        An exception from it is logged, and the turn goes on: the messages were evicted
        and stay in the cold tier, but are not handed over again."""
        raise NotImplementedError

    def _hook_failed(self) -> None:
        log.exception(
            "memevict: the on_evict callback of namespace %r failed; the turn goes on "
            "(what this write evicted is not handed over again)",
            self.store.namespace,
        )

    def _changes(self, stored: Policy) -> dict[str, Any]:
        """The fields given in code that the namespace's stored policy does not have,
        each logged with its stored value (an operator's change is set back)."""
        changes = {k: v for k, v in self._wanted.items() if getattr(stored, k) != v}
        for field, value in changes.items():
            log.warning(
                "memevict: namespace %r has %s=%r, set to %r as given in code",
                self.store.namespace,
                field,
                getattr(stored, field),
                value,
            )
        return changes

    def _unseen(self, entries: Sequence[Entry]) -> list[Entry]:
        return [e for e in entries if not self._known.holds(e)]

    def _count(self, entry: Entry) -> int:
        """The cost of an entry: count_tokens of what the model reads of it, at least 1
        (an empty reply costs 0 with a tokenizer; a memory costs 1 at least)."""
        return min(max(1, self.count_tokens(entry.message.text)), MAX_MEMORY_TOKENS)

    def _item(self, entry: Entry, importance: float) -> Item:
        """The memory of an entry; one over the whole budget is remembered alone at the
        lowest importance, so that it goes to the cold tier at once (kept, recallable)
        instead of being refused or evicting everything else."""
        tokens = self._count(entry)
        if 0 < self.max_tokens < tokens:
            log.warning(
                "memevict: %s costs %d tokens, over max_tokens %d: kept in the cold tier, "
                "sent only while it is the current turn",
                entry.id,
                tokens,
                self.max_tokens,
            )
            return Item(entry.id, OVER_BUDGET_IMPORTANCE, text=entry.text, tokens=self.max_tokens)
        return Item(
            entry.id,
            importance,
            text=entry.text,
            whitelist=importance >= self.pin_at,
            tokens=tokens,
            group=entry.group,
            terms=terms(entry.message.text) if self._index(entry) else (),
        )

    def _items(self, entries: Sequence[Entry], importances: Sequence[float]) -> list[Item]:
        """The memories of ``entries``. A user's message takes the importance of what
        answers it (the items after it, up to the next user message) less ASKED_BELOW
        where that is higher, and the whole importance of a tool call or result it
        caused, so that an answer kept is seldom kept without its question and
        a tool call never: in the same call, or by remembering the question again (with
        its text) before the answer."""
        items = [self._item(e, i) for e, i in zip(entries, importances, strict=True)]
        out: list[Item] = []
        for entry, item in zip(entries, items, strict=True):
            asked = self._asked
            lift = item.importance - (0.0 if is_tool(entry.message) else ASKED_BELOW)
            if entry.message.role == "user":
                self._asked = item if item.importance != OVER_BUDGET_IMPORTANCE else None
            elif asked is not None and lift > asked.importance:
                self._asked = replace(asked, importance=lift)
                if asked in out:  # (asked in this call: remembered once, lifted)
                    out[out.index(asked)] = self._asked
                else:
                    out.append(self._asked)
            out.append(item)
        if self.settings.token_weight:
            tools = {e.id for e in entries if is_tool(e.message)}
            out = [item if item.id in tools else self._weighted(item) for item in out]
        return out

    def _weighted(self, item: Item) -> Item:
        """``item`` ranked by its value per token, as far as ``token_weight`` asks: its
        importance times (WEIGHED_AT / tokens) ** token_weight when it is longer than
        WEIGHED_AT tokens, where the budget is what ranks compete for; a shorter one keeps
        its importance (so no short line climbs past a tool error, which keeps its own).
        Not a pinned memory (ranked by the whitelist), one over the budget (cold at once)
        or a tool call or result (its worth is what it explains: a long traceback is as
        needed as a short one; see _items)."""
        if item.whitelist or item.importance == OVER_BUDGET_IMPORTANCE:
            return item
        factor = min(1.0, (WEIGHED_AT / max(1, item.tokens)) ** self.settings.token_weight)
        return replace(item, importance=item.importance * factor)

    def _index(self, entry: Entry) -> bool:
        """Whether the namespace indexes the memory of ``entry``: not a tool call or result
        (recall_memory's own among them): recall brings back what was said,
        never a bare tool exchange without the request that explains it (the agent's
        answer carries what the tool found)."""
        return bool(self._wanted["index"]) and not is_tool(entry.message)

    def _cost(self, entries: Iterable[Entry]) -> int:
        return sum(map(self._count, entries))

    def _first(
        self, tail: Sequence[Entry], recent: Sequence[Entry]
    ) -> tuple[list[Entry], int | None]:
        """What is sent whatever the ranks: the current turn ``tail`` (always) after the
        ``recent`` entries that fit, newest first, a group whole or not at all; and what
        is left of max_tokens for the window (0 or less: no room; None: no budget)."""
        left = None if self.max_tokens == 0 else self.max_tokens - self._cost(tail)
        kept: list[Entry] = []
        for unit in reversed(_units(without(recent, tail))):
            cost = self._cost(unit)
            if left is not None and cost > left:
                break
            kept[:0] = unit
            left = None if left is None else left - cost
        return kept + [e for e in tail], left

    def _forget_all(self) -> None:
        """After the namespace was lost: nothing this conversation stored is there (its
        question is not lifted again: it may have been cleared on purpose)."""
        self._settled = False
        self._known.clear()
        self._asked = None
        self._held = None

    def _tell_lost(self) -> None:
        """Counts a loss and tells ``on_lost`` (which may raise: the call fails, once)."""
        self.losses += 1
        if self.settings.on_lost is not None:
            self.settings.on_lost(self.store.namespace)

    def _recreating(self) -> None:
        """Before starting again a namespace lost under the store (NamespaceLost): the
        next window finds a new epoch (see _lost), so what the framework still holds is
        stored again."""
        log.warning(
            "memevict: namespace %r was lost (FLUSHDB, a restart without persistence, a "
            "failover): starting it again",
            self.store.namespace,
        )
        self._forget_all()
        if not self._loss_noted:  # (the next window finds the same loss: told once)
            self._loss_noted = True
            self._tell_lost()

    def _lost(self, window: Context) -> bool:
        """Whether the namespace was created again since the last window (its keys lost,
        or dropped by another worker): then nothing this conversation stored is there,
        whatever ``known`` says."""
        lost = self._epoch is not None and window.epoch != self._epoch
        self._epoch = window.epoch
        noted, self._loss_noted = self._loss_noted, False
        if lost:
            log.warning(
                "memevict: namespace %r was lost (FLUSHDB, idle_ttl_s, a restart without "
                "persistence, a clear by another worker): storing the conversation again",
                self.store.namespace,
            )
            self._forget_all()
            if not noted:
                self._tell_lost()
        return lost

    # --- the logic, as steps (see Conversation for what each does) ------------------

    def _settle_steps(self) -> Steps[None]:
        if not self._settled:
            store = yield lambda: self.store  # (an async store: opened by the await)
            changes = self._changes(store.policy)
            if changes:
                yield lambda: self.store.set_policy(**changes)
            self._settled = True

    def _add_steps(self, entries: Sequence[Entry], only_new: bool) -> Steps[None]:
        yield from self._settle_steps()
        asked, losses = self._asked, self.losses

        def attempt() -> Steps[None]:
            # (again after a loss: without the question, which went with the namespace)
            self._asked = asked if self.losses == losses else None
            yield from self._remember_steps(entries, only_new)

        yield from self._again(attempt)

    def recall_steps(self, query: str, read: Reader, k: int, max_tokens: int) -> Steps[str]:
        """The steps of :meth:`Conversation.recall_memory`."""
        text = query[:_QUERY_CHARS] if isinstance(query, str) else ""
        shown = _shown(text)
        yield from self._settle_steps()
        if not self._wanted["index"]:
            return RECALL_OFF
        words = query_terms(text)  # (the words alone: no control character, no surrogate)
        if not words:
            return f"{_NONE}matches {shown}: it has no word to search for (give a name or a topic)."
        search = partial(self.store.search, " ".join(words), k)
        matches: list[Match] = yield from self._again(lambda: _call(search))
        return recall_text(shown, matches, read, self.count_tokens, max_tokens, self._known.order())

    def get_steps(self, id: str) -> Steps[Memory | None]:
        """The steps of :meth:`Conversation.get`."""
        memory: Memory | None = yield from self._again(lambda: _call(partial(self.store.get, id)))
        return memory

    def evicted_steps(self, ids: Sequence[str]) -> Steps[None]:
        """Hands over what a write other than ``add`` evicted (its reply's ids), to the
        adapter's ``on_evict``: their texts read from the cold tier (one gone meanwhile,
        dropped by another worker, is left out)."""
        hook = self.settings.on_evicted
        if hook is None or not ids:
            return
        left: list[tuple[str, str | None]] = []
        for id in ids:
            memory = yield partial(self.store.get, id)
            if memory is not None:
                left.append((id, memory.text))
        if left:
            yield partial(self._hand_over, hook, left)

    def _again(self, send: Callable[[], Steps[T]]) -> Steps[T]:
        """``send()``, and once more after starting again a namespace lost under the
        store (NamespaceLost: nothing was written)."""
        try:
            return (yield from send())
        except NamespaceLost:
            self._recreating()
            yield self.store.recreate
            return (yield from send())

    def _remember_steps(self, entries: Sequence[Entry], only_new: bool) -> Steps[None]:
        if only_new:
            entries = self._unseen(entries)
            stored = []
            for e in entries:
                memory = yield partial(self.store.get, e.id)
                # (an entry with a digest may be edited: stored with another text)
                if memory is not None and (e.digest is None or memory.text == e.text):
                    stored.append(e)
            self._known.add(stored)
            entries = without(entries, stored)
        importances = yield partial(self._importances, [e.message for e in entries])
        hook = self.settings.on_evicted
        for batch in _batches(self._items(entries, importances)):
            self._held, held = None, self._held  # (None if the call fails)
            done = yield partial(self.store.remember_many, batch, evicted_texts=hook is not None)
            if held is not None:
                self._held = held.after(batch, done)
            if hook is not None and done.evicted:
                # (from the call's own reply: each eviction is one call's, so two workers
                # of one session never hand the same one over, and none goes unseen)
                left = list(zip(done.evicted, done.evicted_texts, strict=True))
                yield partial(self._hand_over, hook, left)
        self._known.add(entries)

    def _context_steps(
        self,
        budget: int | None,
        first: Sequence[Entry],
        asking: bool = False,
        stored: bool = False,
    ) -> Steps[tuple[Context, bool]]:
        """The window (ids and texts) of what ``first`` (sent anyway) leaves of the hot
        tier, with what matches the latest user message of ``first`` in its share of the
        budget (Settings.recall_share), and whether the namespace was lost since the last.
        ``asking``: only if that message is the last of ``first`` (not answered yet).
        ``stored``: every entry of ``first`` was remembered (no current turn still to
        store, which the window must leave room for): the hot tier held may serve it."""
        skip = _skip(first)
        asked = [e.message.text for e in first if e.message.role == "user"]
        if asking and not (first and first[-1].message.role == "user"):
            asked = []
        share = self.settings.recall_share
        query = asked[-1] if asked and share != 0 and self._wanted["index"] else None
        if stored and query is None and budget is not None and self.max_tokens > 0:
            held = yield from self._held_window(budget, skip)
            if held is not None:
                return held, self._lost(held)
        window: Context = yield from self._again(
            lambda: _call(partial(self.store.context, budget, skip=skip, query=query, share=share))
        )
        return window, self._lost(window)

    def _held_window(self, budget: int, skip: Sequence[str]) -> Steps[Context | None]:
        """The window of ``budget`` less ``skip`` from the hot tier held (:class:`Held`),
        after one read of the namespace's version; the hot tier read whole first where it
        is not held, or no more current. None where the window is not all of the hot tier
        less ``skip`` (the server then ranks it)."""
        if self._no_version:
            return None
        held = self._held  # (read once: another task may write meanwhile)
        if held is not None:
            try:
                now: Version | None = yield self.store.version
            except PermissionDenied:
                log.warning(
                    "memevict: namespace %r: this user may not run HGETALL, with which an "
                    "adapter reads the namespace's version (the ACL rules of memevict before "
                    "issue 41: `memevict acl` prints the new ones); the window is read with "
                    "context instead (said once)",
                    self.store.namespace,
                )
                self._no_version, self._held = True, None
                return None
            if now is not None:
                window = held.window(budget, skip, now)
                if window is not None or (now.epoch, now.version) == (held.epoch, held.version):
                    return window
        whole = partial(self.store.context, self.max_tokens, detail=True)
        read: Context = yield from self._again(lambda: _call(whole))
        self._held = held = Held.of(read)
        if held is None:
            return None
        return held.window(budget, skip, Version(read.epoch, read.version, read.tokens))

    def _window_steps(
        self, tail: Sequence[Entry], recent: Sequence[Entry], asking: bool = False
    ) -> Steps[list[tuple[str, str]]]:
        yield from self._settle_steps()
        first, budget = self._first(tail, recent)
        if budget is not None and budget <= 0:
            return _compose(None, first)
        window, lost = yield from self._context_steps(budget, first, asking, stored=not tail)
        if lost and recent:  # (what this process held is not stored: not sent either)
            return (yield from self._window_steps(tail, (), asking))
        return _compose(window, first)

    def turn_steps(
        self,
        history: Sequence[Entry],
        tail: Sequence[Entry],
        recent: Sequence[Entry],
        again: Callable[[], Sequence[Entry]] | None,
    ) -> Steps[list[tuple[str, str]]]:
        """The steps of :meth:`Conversation.turn`."""
        yield from self._add_steps(history, only_new=True)
        first, budget = self._first(tail, recent)
        window = None
        if budget is None or budget > 0:
            window, lost = yield from self._context_steps(budget, first)
            if lost:  # store what the framework still holds, then read again
                yield from self._add_steps(history if again is None else again(), True)
                window, _ = yield from self._context_steps(budget, first)
        yield from self._add_steps(self._unseen(tail), False)  # (new but for a retry: no lookup)
        return _compose(window, first)


ConversationT = TypeVar("ConversationT", "Conversation", "AsyncConversation")


def open_conversation(
    kind: type[ConversationT],
    what: str,
    namespace: str,
    settings: Settings,
    *,
    url: str | None,
    client: Any,
    store: Any,
) -> ConversationT:
    """An adapter's conversation: on ``store`` as it is, or on a store of ``namespace`` on
    ``client`` (opened with cached_open: what a store before on the client found) or on
    a client of its own of ``url``, with the settings' policy if the namespace is new (the
    conversation then applies the fields it was given:
    :meth:`Conversation.settle`). ``what`` (the adapter) is named in the BadArgument
    unless exactly one of url, client and store is given; their types are the adapter's
    (a sync client or store for a :class:`Conversation`)."""
    policy = settings.namespace_policy()
    check_one_of(what, url, client, store)
    if store is None:
        opened = kind.store_kind
        if client is not None:
            # (a session object made per request: opened from what the client knows)
            store = opened(client, namespace, policy, adopt_policy=True, cached_open=True)
        else:
            store = opened.from_url(str(url), namespace, policy, adopt_policy=True)
    return kind(store, settings)


class Conversation(BaseConversation[MemoryStore]):
    """One conversation in one namespace, for a :class:`~memevict.MemoryStore`.

    ``max_tokens`` is the prompt's budget (0: none); it and the Policy fields in
    ``policy`` are applied to the namespace if its stored policy differs (:meth:`settle`).
    ``labeler`` gives each item its importance (the built-in rules by default); an item
    at ``pin_at`` or above (an instruction, by the rules) is whitelisted, so it stays in
    the prompt however old (up to the policy's whitelist_cap). ``count_tokens`` gives its
    cost, of the text the model reads (``Entry.message.text``, not the stored JSON, whose
    field names and metadata the model never sees; :func:`approx_tokens` by default).
    All of these come in :class:`Settings`."""

    store_kind: ClassVar[type[MemoryStore]] = MemoryStore

    def settle(self) -> None:
        """Applies the policy given in code to the namespace, in one atomic call, where
        the policy the store found differs (once; again after the namespace was lost)."""
        run_steps(self._settle_steps())

    def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """Remembers ``entries`` in order; with ``only_new``, those not stored yet. If
        the namespace was lost under the store, it is started again and they are all
        remembered (the next window finds a new epoch: :meth:`turn`)."""
        run_steps(self._add_steps(entries, only_new))

    def get(self, id: str) -> Memory | None:
        """The memory ``id`` as stored, or None (also when the namespace was lost under
        the store, which then starts it again)."""
        return run_steps(self.get_steps(id))

    def recall_memory(
        self, query: str, read: Reader, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS
    ) -> str:
        """What the ``recall_memory`` tool answers ``query``: the ``k`` stored messages,
        hot or cold, that best match its words, read with the adapter's ``read``, as text
        of at most ``max_tokens`` tokens, oldest first (:func:`recall_text`); or a text
        saying why nothing is found (no word to search for, or no index: recall_share=0)."""
        return run_steps(self.recall_steps(query, read, k, max_tokens))

    def window(
        self, tail: Sequence[Entry] = (), recent: Sequence[Entry] = (), *, asking: bool = False
    ) -> list[tuple[str, str]]:
        """The prompt's items as (id, stored text), in time order: the window of the hot
        tier within what ``tail`` (the current turn, always sent) and the ``recent``
        entries that fit (what was just said, newest first) leave of max_tokens, with what
        matches the latest user message among them (``asking``: only if nothing follows
        it: a message answered already asks nothing more)."""
        return run_steps(self._window_steps(tail, recent, asking))

    def turn(
        self,
        history: Sequence[Entry],
        tail: Sequence[Entry],
        *,
        recent: Sequence[Entry] = (),
        again: Callable[[], Sequence[Entry]] | None = None,
    ) -> list[tuple[str, str]]:
        """One model call: remembers the new ``history``, reads the window for the current
        turn ``tail`` and the ``recent`` entries, then remembers the turn (after the window
        is read, so that it does not take the history's room in it). Returns
        :meth:`window`'s answer. If the
        namespace turns out to have been lost, the whole history (``again()``, if
        ``history`` holds only what was new) is remembered again and the window read
        again: nothing the framework still holds is lost for good."""
        return run_steps(self.turn_steps(history, tail, recent, again))

    def _importances(self, messages: list[Message]) -> list[float]:
        return importances_of(self.labeler, messages)

    def _hand_over(self, hook: OnEvicted, evicted: list[tuple[str, str | None]]) -> None:
        try:
            result = hook(self.store.namespace, evicted)
        except Exception:
            self._hook_failed()
            return
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()  # (never awaited: no warning of it)
            raise BadArgument(
                "on_evict returned an awaitable, which a sync conversation cannot await: "
                "give a plain function (or use the adapter's async methods)"
            )


class AsyncConversation(BaseConversation[AsyncMemoryStore]):
    """:class:`Conversation` for an :class:`~memevict.aio.AsyncMemoryStore`; the labeler
    may be async."""

    store_kind: ClassVar[type[AsyncMemoryStore]] = AsyncMemoryStore

    async def settle(self) -> None:
        """See :meth:`Conversation.settle`."""
        await arun_steps(self._settle_steps())

    async def add(self, entries: Sequence[Entry], *, only_new: bool = False) -> None:
        """See :meth:`Conversation.add`."""
        await arun_steps(self._add_steps(entries, only_new))

    async def get(self, id: str) -> Memory | None:
        """See :meth:`Conversation.get`."""
        return await arun_steps(self.get_steps(id))

    async def recall_memory(
        self, query: str, read: Reader, *, k: int = RECALL_K, max_tokens: int = RECALL_TOKENS
    ) -> str:
        """See :meth:`Conversation.recall_memory`."""
        return await arun_steps(self.recall_steps(query, read, k, max_tokens))

    async def window(
        self, tail: Sequence[Entry] = (), recent: Sequence[Entry] = (), *, asking: bool = False
    ) -> list[tuple[str, str]]:
        """See :meth:`Conversation.window`."""
        return await arun_steps(self._window_steps(tail, recent, asking))

    async def turn(
        self,
        history: Sequence[Entry],
        tail: Sequence[Entry],
        *,
        recent: Sequence[Entry] = (),
        again: Callable[[], Sequence[Entry]] | None = None,
    ) -> list[tuple[str, str]]:
        """See :meth:`Conversation.turn`."""
        return await arun_steps(self.turn_steps(history, tail, recent, again))

    async def _importances(self, messages: list[Message]) -> list[float]:
        return await aimportances_of(self.labeler, messages)

    async def _hand_over(self, hook: OnEvicted, evicted: list[tuple[str, str | None]]) -> None:
        try:
            result = hook(self.store.namespace, evicted)
            if inspect.isawaitable(result):
                await result
        except Exception:
            self._hook_failed()
