"""Per question, within a token budget: does the context an agent would send for the
question hold one of its evidence turns? (``memevict simulate --per-question``)

A transcript is replayed, once per budget, into a namespace of the adapters' policy
(``memevict.integrations._conversation.conversation_policy``: the hot tier within the
budget, a lexical index) with any Policy fields given; each memory costs
``tokens_of(text)`` (about 4 characters a token), at most the budget. This is the store
alone, as an adapter calls it but without what an adapter adds (the latest messages
sent whatever their rank, a question lifted to the importance of its answer). Each
question is asked when the transcript asks it (LoCoMo: at the end), two ways:

- ``question``: the question is the query, and the context has the budget less the
  question's tokens (the question is the current message, sent besides);
- ``previous`` (harder): the query is the user message before the question (the latest
  memory turn of role "user", or the latest turn if none has a role), and the context
  has the whole budget: what an agent holds before the question comes.

Five contexts of that size, over the memories said so far (and not forgotten):

- ``fifo``: the newest messages that fit (:func:`memevict.simulate.baselines.fifo`);
- ``fifo_slice``: FIFO in 1 - share of the budget and the best matches of the query in
  the rest, per share (:func:`~memevict.simulate.baselines.fifo_slice`); the report shows
  the share best over all the transcripts, for each budget and query;
- ``search``: the best matches alone (:func:`~memevict.simulate.baselines.search_alone`);
- ``window``: the store's ``context(tokens)``;
- ``window_recall``: ``context(tokens, query=...)``, the window with what matches the
  query in its default share (``memevict.commands.recall_share``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from memevict.integrations._conversation import approx_tokens, conversation_policy
from memevict.simulate.baselines import TokenCounter, fifo, fifo_slice, search_alone
from memevict.simulate.policies import MemevictRunner, clear
from memevict.simulate.replay import ask_schedule
from memevict.simulate.transcript import Action, MemoryTurn, Question, Transcript

BUDGETS = (2000, 5000, 10000)
SHARES = (0.1, 0.2, 0.3)  # of the budget, FIFO + slice's matches
QUERIES = ("question", "previous")
ROWS = ("fifo", "fifo_slice", "search", "window", "window_recall")
TITLES = {
    "fifo": "FIFO",
    "fifo_slice": "FIFO + slice",
    "search": "search alone",
    "window": "window",
    "window_recall": "window + recall",
}
HEADINGS = {
    "question": "The question as the query (the context: the budget less the question)",
    "previous": "Harder: the user message before the question as the query (the whole budget)",
}


@dataclass(frozen=True, slots=True)
class Coverage:
    """One transcript, budget and query: for each context (``fifo``, ``search``,
    ``window``, ``window_recall``, and ``slice <share>`` for each share), whether it
    held an evidence turn of each question, in the transcript's order."""

    source: str
    budget: int
    query: str  # "question" or "previous"
    found: Mapping[str, tuple[bool, ...]]

    @property
    def questions(self) -> int:
        return len(self.found["fifo"])

    def covered(self, row: str) -> int:
        return sum(self.found[row])


def slice_key(share: float) -> str:
    return f"slice {share:g}"


def previous_query(said: Sequence[MemoryTurn]) -> str:
    """The user message before a question asked after ``said``: the latest turn of role
    "user", or the latest turn if none has that role ("" before any)."""
    users = [t for t in said if t.role == "user"]
    latest = users or list(said)
    return (latest[-1].text or "") if latest else ""


def per_question(
    client: redis.Redis,
    transcript: Transcript,
    budgets: Sequence[int] = BUDGETS,
    fields: Mapping[str, Any] | None = None,
    *,
    queries: Collection[str] = QUERIES,
    shares: Sequence[float] = SHARES,
    tokens_of: TokenCounter = approx_tokens,
    prefix: str | None = None,
) -> list[Coverage]:
    """Replays ``transcript`` (labelled) once per budget, each in its namespace
    ``<prefix>-<n>`` (``memevict-simulate-<8 random hex digits>`` unless given; cleared
    before and after), and measures every question: one Coverage per budget and query."""
    unknown = sorted(set(queries) - set(QUERIES))
    if unknown:
        raise ValueError(f"unknown queries {', '.join(unknown)}: choose from {', '.join(QUERIES)}")
    prefix = prefix if prefix is not None else f"memevict-simulate-{secrets.token_hex(4)}"
    out: list[Coverage] = []
    for n, budget in enumerate(budgets):
        namespace = f"{prefix}-{n}"
        policy = conversation_policy(budget, **dict(fields or {}))
        clear(client, namespace)
        try:
            runner = MemevictRunner(client, namespace, policy, tokens_of)
            found = _replay(transcript, runner, budget, queries, shares, tokens_of)
        finally:
            clear(client, namespace)
        out += [Coverage(transcript.source, budget, q, found[q]) for q in QUERIES if q in queries]
    return out


def _replay(
    transcript: Transcript,
    runner: MemevictRunner,
    budget: int,
    queries: Collection[str],
    shares: Sequence[float],
    tokens_of: TokenCounter,
) -> dict[str, dict[str, tuple[bool, ...]]]:
    """Replays the events; at each moment questions are asked, every context for each."""
    questions = transcript.questions
    schedule = ask_schedule(transcript)
    said: dict[str, MemoryTurn] = {}  # the memories said and not forgotten, latest text
    held: dict[str, dict[str, list[bool]]] = {
        q: {row: [False] * len(questions) for row in _keys(shares)} for q in queries
    }
    now = transcript.events[0].at if transcript.events else 0

    def ask(asked: Sequence[int]) -> None:
        messages = [(id, t.text or "") for id, t in said.items()]
        store = runner.store

        def contexts(query: str, room: int) -> dict[str, set[str]]:
            if room <= 0:
                return {key: set() for key in _keys(shares)}
            got: dict[str, set[str]] = {
                "fifo": set(fifo(messages, room, tokens_of)),
                "search": set(search_alone(messages, query, room, tokens_of)),
                "window": {id for id, _ in store.context(room, now=now).items},
                "window_recall": {id for id, _ in store.context(room, query=query, now=now).items},
            }
            for share in shares:
                got[slice_key(share)] = set(fifo_slice(messages, query, room, share, tokens_of))
            return got

        before: dict[str, set[str]] = {}
        if "previous" in queries and asked:
            before = contexts(previous_query(list(said.values())), budget)
        for i in asked:
            question: Question = questions[i]
            for kind in queries:
                if kind == "question":
                    room = budget - tokens_of(question.question)
                    found = contexts(question.question, room)
                else:
                    found = before
                for row, ids in found.items():
                    held[kind][row][i] = any(e in ids and e in said for e in question.evidence)

    ask(schedule.get(-1, []))
    for i, event in enumerate(transcript.events):
        now = event.at
        if isinstance(event, MemoryTurn):
            said.pop(event.id, None)  # (an update: said again, now)
            said[event.id] = event
            runner.remember(event)
        else:
            runner.act(event)
            if isinstance(event, Action) and event.action == "forget":
                said.pop(event.id, None)
        if i in schedule:
            ask(schedule[i])
    return {q: {row: tuple(flags) for row, flags in held[q].items()} for q in queries}


def _keys(shares: Sequence[float]) -> list[str]:
    return ["fifo", "search", "window", "window_recall", *map(slice_key, shares)]


# -- the report ----------------------------------------------------------------


def best_shares(results: Sequence[Coverage]) -> dict[tuple[str, int], float]:
    """For each (query, budget): the FIFO + slice share that covers the most questions
    over all the transcripts (ties: the smaller share)."""
    best: dict[tuple[str, int], float] = {}
    for key in dict.fromkeys((r.query, r.budget) for r in results):
        group = [r for r in results if (r.query, r.budget) == key]
        shares = [float(k.split()[1]) for k in group[0].found if k.startswith("slice ")]
        if shares:
            best[key] = max(shares, key=lambda s: (sum(r.covered(slice_key(s)) for r in group), -s))
    return best


def _count(r: Coverage, row: str, best: Mapping[tuple[str, int], float]) -> int | None:
    if row == "fifo_slice":
        share = best.get((r.query, r.budget))
        return None if share is None else r.covered(slice_key(share))
    return r.covered(row)


def _cell(covered: int | None, questions: int) -> str:
    if covered is None:
        return "-"
    return f"{covered}/{questions} ({covered / questions:.1%})" if questions else "-"


def per_question_table(results: Sequence[Coverage], name: Callable[[str], str] = str) -> str:
    """Per query: the five rows by budget (covered / questions), and the window with
    recall over FIFO; over all the transcripts, then each transcript's (``*`` where the
    window with recall covers fewer than FIFO)."""
    best = best_shares(results)
    budgets = list(dict.fromkeys(r.budget for r in results))
    sources = list(dict.fromkeys(r.source for r in results))
    lines = [
        "Per question (memevict's window: the store's context(tokens) in a namespace of the "
        "adapters' policy, max_tokens the budget; the baselines worked out from the transcript)"
    ]
    for query in [q for q in QUERIES if any(r.query == q for r in results)]:
        mine = [r for r in results if r.query == query]
        shares = ", ".join(f"{best[(query, b)]:g} at {b}" for b in budgets if (query, b) in best)
        lines += ["", f"{HEADINGS[query]}; FIFO + slice's share: {shares or '-'}:"]
        rows = [["", "", *(f"{b} tokens" for b in budgets)]]
        groups = [("all", mine)] if len(sources) > 1 else []
        groups += [(name(s), [r for r in mine if r.source == s]) for s in sources]
        for label, group in groups:
            at = {b: [r for r in group if r.budget == b] for b in budgets}
            for i, row in enumerate(ROWS):
                cells = []
                for budget in budgets:
                    counts = [_count(r, row, best) for r in at[budget]]
                    asked = sum(r.questions for r in at[budget])
                    covered = None if None in counts else sum(c or 0 for c in counts)
                    below = (
                        row == "window_recall"
                        and label != "all"
                        and any(r.covered("window_recall") < r.covered("fifo") for r in at[budget])
                    )
                    cells.append(_cell(covered, asked) + ("*" if below else ""))
                rows.append([label if i == 0 else "", TITLES[row], *cells])
            ratios = []
            for budget in budgets:
                fifo_n = sum(r.covered("fifo") for r in at[budget])
                recall_n = sum(r.covered("window_recall") for r in at[budget])
                ratios.append(f"{recall_n / fifo_n:.2f}x" if fifo_n else "-")
            rows.append(["", "recall / FIFO", *ratios])
        lines += _aligned(rows)
    lines += ["", "* the window with recall covers fewer questions than FIFO"]
    return "\n".join(lines)


def per_question_json(results: Sequence[Coverage]) -> dict[str, Any]:
    """The counts: per query and budget, over all the transcripts and for each."""
    best = best_shares(results)
    out: dict[str, Any] = {}
    for r in results:
        entry = out.setdefault(r.query, {}).setdefault(str(r.budget), {"transcripts": []})
        entry["fifo_slice_share"] = best.get((r.query, r.budget))
        entry["transcripts"].append(
            {
                "source": r.source,
                "questions": r.questions,
                **{row: _count(r, row, best) for row in ROWS},
                "slices": {k.split()[1]: r.covered(k) for k in r.found if k.startswith("slice ")},
            }
        )
    for by_budget in out.values():
        for entry in by_budget.values():
            each = entry["transcripts"]
            entry["questions"] = sum(t["questions"] for t in each)
            for row in ROWS:
                values = [t[row] for t in each]
                entry[row] = None if None in values else sum(values)
    return out


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
