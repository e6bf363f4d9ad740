"""A seeded tool-heavy agent conversation: a customer asks a support agent about orders,
shipments, balances and invoices, and the agent answers each request with one tool call,
as plain data that a scripted model and scripted tools of any framework can replay.

What it promises (tests/test_tool_heavy.py checks each):

- ``tool_heavy(turns, seed)``: ``turns`` turns (at least MIN_TURNS), numbered from 0;
  each is one user message, then exactly one tool call (a tool of TOOLS, string
  arguments that its parameters name), its result (an output, or an error), then one
  assistant answer. No framework is imported here.
- Most turns are routine lookups whose outputs are records with ids and numbers
  ("order 4315: status shipped 2026-11-02 via DHL; tracking T4315-0; ...").
- Retries: some routine calls fail with a transient error (a timeout, a 503); the next
  turn asks to try again and makes the same call (same tool, same arguments), which
  succeeds. No later turn needs those errors.
- The payment error: turn ERROR_AT's call (``charge_card``) fails with an error that
  gives the reason (PAYMENT_REASON, "insufficient funds"); that turn's answer does not
  give it. The turns ``needs_error`` (after ERROR_AT, before the last) ask about the
  consequence; their tools' results do not give the reason, and their answers do: they
  need the error.
- The value asked for later: turn VALUE_AT asks for a refund, and its output and answer
  hold a reference (``value``) no other text before the last turn holds; the last turn
  asks for that reference again, and its tool's result does not hold it (its answer
  does): the evidence is turn VALUE_AT's output or answer, or nothing.
- Every user text and every answer is said once (a text names its turn).
- The same ``turns`` and ``seed`` give the same conversation, in any process; another
  seed gives other ids, amounts and wording, the same structure.
- ``tool_heavy_transcript(turns, seed)``: the same conversation as a transcript for
  ``memevict simulate --generator tool-heavy``: each turn's user message, call, result and
  answer are memory turns ``u<i>``, ``c<i>``, ``o<i>``, ``a<i>`` (unlabelled; a call has
  kind function_call, a result kind function_call_output and, when it failed, tool_status
  error), TURN_MS apart; the questions are the payment error's reason, asked at each
  ``needs_error`` turn (its evidence: the error), and the reference, asked at the last
  turn (its evidence: turn VALUE_AT's output and answer).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from memevict.simulate.transcript import START_MS, TURN_MS, MemoryTurn, Question, Transcript

MIN_TURNS = 10
VALUE_AT = 3  # the turn that asks for the refund reference
ERROR_AT = 7  # the turn whose tool call fails with the payment error
CARD = "4242"  # the declined card's last digits
PAYMENT_REASON = "insufficient funds"
_START = date(2026, 11, 2)
_ALPHANUM = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the agent has: its name, what it does, its string parameters (all required)."""

    name: str
    description: str
    params: tuple[str, ...]

    def schema(self) -> dict[str, object]:
        """Its parameters as a JSON schema (strict: every one required, no others)."""
        return {
            "type": "object",
            "properties": {p: {"type": "string"} for p in self.params},
            "required": list(self.params),
            "additionalProperties": False,
        }


TOOLS: Mapping[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec("get_order", "Looks an order up: status, shipping, items, total.", ("order_id",)),
        ToolSpec("track_shipment", "Tracks a shipment by its tracking number.", ("tracking",)),
        ToolSpec("get_balance", "An account's balance and pending charges.", ("account",)),
        ToolSpec("get_invoice", "An invoice's lines, total, due date and status.", ("invoice",)),
        ToolSpec("charge_card", "Charges an order to a card on file.", ("order_id", "card")),
        ToolSpec("issue_refund", "Refunds an order to the card that paid it.", ("order_id",)),
        ToolSpec("list_cards", "The cards a customer has on file.", ("customer",)),
    )
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: the tool's name and its arguments, in its parameters' order."""

    name: str
    args: tuple[tuple[str, str], ...]

    @property
    def arguments(self) -> dict[str, str]:
        return dict(self.args)

    @property
    def json(self) -> str:
        """The arguments as a JSON object (what a model API sends)."""
        return json.dumps(self.arguments)


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn: what the user says, the agent's one tool call, the tool's output or
    error (exactly one of them), and the agent's answer. ``kind``: "routine", "transient"
    (a routine call that fails, retried next turn), "retry", "value" (VALUE_AT),
    "payment_error" (ERROR_AT), "needs_error" or "value_again" (the last turn)."""

    index: int
    kind: str
    user: str
    call: ToolCall
    output: str | None
    error: str | None
    answer: str

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def result(self) -> str:
        """The output, or the error."""
        return self.output if self.output is not None else str(self.error)


@dataclass(frozen=True, slots=True)
class Conversation:
    """The turns, and where its two tests of memory are: the payment error (``error_at``,
    needed at ``needs_error``) and the value asked for later (``value``, said at
    ``value_at``, asked for again at ``value_again_at``)."""

    seed: int
    turns: tuple[Turn, ...]
    error_at: int
    needs_error: tuple[int, ...]
    value: str
    value_at: int
    value_again_at: int

    @property
    def error(self) -> str:
        """The payment error's text."""
        return str(self.turns[self.error_at].error)

    def turn_of_user(self) -> dict[str, int]:
        """Each user text's turn."""
        return {t.user: t.index for t in self.turns}

    def turn_of_answer(self) -> dict[str, int]:
        """Each answer's turn."""
        return {t.answer: t.index for t in self.turns}


def needs_error_at(turns: int) -> tuple[int, ...]:
    """The turns that need the payment error: spread between it and the last turn."""
    last = turns - 1
    wanted = (
        [ERROR_AT + (last - ERROR_AT) * k // 3 for k in (1, 2)] + [last - 1]
        if turns >= 20
        else [ERROR_AT + (last - ERROR_AT) // 2, last - 1]
    )
    return tuple(sorted({t for t in wanted if ERROR_AT < t < last}))


def transient_at(turns: int) -> tuple[int, ...]:
    """The routine turns whose call fails for a while (the next turn retries it)."""
    taken = {VALUE_AT, ERROR_AT, turns - 1, *needs_error_at(turns)}
    found: list[int] = []
    for t in range(4, turns - 2):
        if t % 11 == 5 and not {t, t + 1} & taken:
            found.append(t)
    return tuple(found)


def _code(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(_ALPHANUM, k=n))


def _day(turn: int) -> date:
    return _START + timedelta(days=turn // 8)


def _money(rng: random.Random) -> str:
    return f"{rng.randint(12, 900)}.{rng.randint(0, 99):02d}"


@dataclass(frozen=True, slots=True)
class _Lookup:
    """A routine lookup before it is worded as a turn."""

    call: ToolCall
    ask: str  # the user's request
    again: str  # the user's request to try it again
    output: str
    answer: str
    service: str  # what fails, in a transient error
    subject: str  # what the lookup is about ("order 4315")


def _call(name: str, *values: str) -> ToolCall:
    return ToolCall(name, tuple(zip(TOOLS[name].params, values, strict=True)))


def _routine(rng: random.Random, turn: int, n: int) -> _Lookup:
    """A lookup about order number ``n`` (its ids are made of it: said once)."""
    day = _day(turn)
    kind = rng.choice(("order", "order", "tracking", "balance", "invoice"))
    if kind == "order":
        carrier = rng.choice(("DHL", "UPS", "FedEx", "La Poste"))
        items = rng.randint(1, 4)
        skus = ", ".join(
            f"SKU-{rng.randint(1000, 9999)} x{rng.randint(1, 3)}" for _ in range(items)
        )
        total, warehouse = _money(rng), f"WH-{rng.randint(1, 9)}"
        ask = rng.choice(
            (
                f"Has order {n} shipped yet?",
                f"What's the status of order {n}?",
                f"Can you check on my order {n}?",
            )
        )
        return _Lookup(
            _call("get_order", str(n)),
            ask,
            f"Could you look order {n} up again, please?",
            f"order {n}: status shipped {day.isoformat()} via {carrier}; tracking T{n}-0; "
            f"items {items} ({skus}); total {total} USD; warehouse {warehouse}; "
            f"updated {day.isoformat()}T{rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}Z",
            f"Order {n} shipped on {day:%B} {day.day} via {carrier}; its tracking number "
            f"is T{n}-0 ({items} item{'s' if items > 1 else ''}, {total} USD).",
            "order service",
            f"order {n}",
        )
    if kind == "tracking":
        hub = rng.choice(("Leipzig", "Memphis", "Louisville", "Roissy", "Liege"))
        eta = day + timedelta(days=rng.randint(1, 4))
        parcels = rng.randint(1, 3)
        return _Lookup(
            _call("track_shipment", f"T{n}-1"),
            f"Where is my package with tracking number T{n}-1?",
            f"Please try tracking T{n}-1 again.",
            f"T{n}-1: in transit; last scan {hub} hub {day.isoformat()} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}; ETA {eta.isoformat()}; "
            f"parcels {parcels} of {parcels + rng.randint(0, 2)}; weight "
            f"{rng.randint(1, 30)}.{rng.randint(0, 9)} kg; service express",
            f"Package T{n}-1 was last scanned at the {hub} hub and should arrive on "
            f"{eta:%B} {eta.day}.",
            "tracking service",
            f"package T{n}-1",
        )
    if kind == "balance":
        balance, pending = _money(rng), rng.randint(0, 4)
        return _Lookup(
            _call("get_balance", f"AC-{n}"),
            f"What's the balance on account AC-{n}?",
            f"Can you check the balance of AC-{n} again?",
            f"account AC-{n}: balance {balance} USD; available {balance} USD less "
            f"{pending} pending charges; credit limit {rng.randint(5, 50) * 100} USD; "
            f"last statement {day.replace(day=1).isoformat()}; currency USD",
            f"Account AC-{n} has a balance of {balance} USD, with {pending} "
            f"pending charge{'s' if pending != 1 else ''}.",
            "accounts service",
            f"account AC-{n}",
        )
    lines, total = rng.randint(1, 6), _money(rng)
    due = day + timedelta(days=30)
    status = rng.choice(("paid", "open", "paid", "partially paid"))
    return _Lookup(
        _call("get_invoice", f"INV-{n}"),
        f"Can you pull up invoice INV-{n} for me?",
        f"Please fetch invoice INV-{n} again.",
        f"invoice INV-{n}: lines {lines}; total {total} USD; tax {rng.randint(0, 20)}%; "
        f"due {due.isoformat()}; status {status}; issued {day.isoformat()}",
        f"Invoice INV-{n} is {status}: {total} USD over {lines} "
        f"line{'s' if lines > 1 else ''}, due {due:%B} {due.day}.",
        "billing service",
        f"invoice INV-{n}",
    )


def _transient(rng: random.Random, lookup: _Lookup) -> tuple[str, str]:
    """A transient error of the lookup's service, and how the answer says it."""
    if rng.random() < 0.5:
        return f"{lookup.service} timed out after 30 s (request {_code(rng, 8)})", "a timeout"
    return f"{lookup.service} returned 503 Service Unavailable (retry after 5 s)", "a 503"


def tool_heavy(turns: int = 100, seed: int = 0) -> Conversation:
    """The conversation of ``turns`` turns for ``seed`` (see the module's promises)."""
    if turns < MIN_TURNS:
        raise ValueError(f"a tool-heavy conversation has at least {MIN_TURNS} turns")
    rng = random.Random(seed)
    numbers = rng.sample(range(1000, 10_000), turns + 2)  # an order number per turn
    paid, refunded = numbers[-2], numbers[-1]
    customer = f"C-{rng.randint(10_000, 99_999)}"
    other = str(rng.choice([n for n in range(1000, 10_000) if str(n) != CARD]))
    value = f"RF-{_code(rng, 6)}"
    refund, total = _money(rng), _money(rng)
    error = (
        f"payment gateway returned 402: card ending {CARD} declined ({PAYMENT_REASON}); "
        f"order {paid} left unpaid (attempt {_code(rng, 10)})"
    )
    needs = needs_error_at(turns)
    transient = transient_at(turns)
    last = turns - 1
    made: list[Turn] = []
    retry: _Lookup | None = None
    for t in range(turns):
        day = _day(t)
        if t == VALUE_AT:
            made.append(
                Turn(
                    t,
                    "value",
                    f"I sent order {refunded} back last week. Please refund it.",
                    _call("issue_refund", str(refunded)),
                    f"refund issued for order {refunded}: reference {value}; amount {refund} "
                    f"USD to Mastercard ending {other}; expected in 5-7 business days; "
                    f"issued {day.isoformat()}",
                    None,
                    f"Done: order {refunded} is refunded, {refund} USD back to your card "
                    f"ending {other} within 5-7 business days. Your refund reference is {value}.",
                )
            )
        elif t == ERROR_AT:
            made.append(
                Turn(
                    t,
                    "payment_error",
                    f"Please pay order {paid} with my card ending {CARD}.",
                    _call("charge_card", str(paid), CARD),
                    None,
                    error,
                    f"I couldn't take the payment for order {paid}: the gateway declined the "
                    f"card ending {CARD}. Would you like to use another card?",
                )
            )
        elif t in needs:
            made.append(_needs_error(needs.index(t), t, paid, customer, other, total, day))
        elif t == last:
            made.append(
                Turn(
                    t,
                    "value_again",
                    f"What was the refund reference for order {refunded} again? "
                    "My bank is asking for it.",
                    _call("get_order", str(refunded)),
                    f"order {refunded}: status refunded {_day(VALUE_AT).isoformat()}; items 1; "
                    f"total {refund} USD; refund to Mastercard ending {other}",
                    None,
                    f"The refund reference for order {refunded} is {value} ({refund} USD).",
                )
            )
        elif retry is not None:
            made.append(Turn(t, "retry", retry.again, retry.call, retry.output, None, retry.answer))
            retry = None
        else:
            lookup = _routine(rng, t, numbers[t])
            if t in transient:
                failure, said = _transient(rng, lookup)
                answer = (
                    f"I couldn't get {lookup.subject}: the {lookup.service} didn't answer "
                    f"({said}). Shall I try again?"
                )
                made.append(Turn(t, "transient", lookup.ask, lookup.call, None, failure, answer))
                retry = lookup
            else:
                made.append(
                    Turn(t, "routine", lookup.ask, lookup.call, lookup.output, None, lookup.answer)
                )
    return Conversation(seed, tuple(made), ERROR_AT, needs, value, VALUE_AT, last)


def _needs_error(
    k: int, t: int, paid: int, customer: str, other: str, total: str, day: date
) -> Turn:
    """The k-th turn that needs the payment error (its tool does not say why)."""
    if k % 3 == 0:
        return Turn(
            t,
            "needs_error",
            f"Why hasn't order {paid} shipped yet?",
            _call("get_order", str(paid)),
            f"order {paid}: status on hold (awaiting payment) since "
            f"{_day(ERROR_AT).isoformat()}; items 2; total {total} USD; charge attempts 1; "
            f"customer {customer}",
            None,
            f"Order {paid} is on hold because its payment never went through: the charge "
            f"to your card ending {CARD} was declined for {PAYMENT_REASON}.",
        )
    if k % 3 == 1:
        return Turn(
            t,
            "needs_error",
            f"Which card should I use for order {paid}?",
            _call("list_cards", customer),
            f"customer {customer}: cards 2; Visa ending {CARD} (exp 08/27, default); "
            f"Mastercard ending {other} (exp 02/28); checked {day.isoformat()}",
            None,
            f"Not the Visa ending {CARD}: it was declined for {PAYMENT_REASON} on order "
            f"{paid}. I'd use the Mastercard ending {other}.",
        )
    return Turn(
        t,
        "needs_error",
        f"What exactly went wrong with my payment for order {paid}?",
        _call("get_invoice", f"INV-{paid}"),
        f"invoice INV-{paid}: lines 2; total {total} USD; due "
        f"{(_day(ERROR_AT) + timedelta(days=30)).isoformat()}; status unpaid; payments 0",
        None,
        f"The payment gateway declined the card ending {CARD} with a 402 for "
        f"{PAYMENT_REASON}, so invoice INV-{paid} is still unpaid.",
    )


def tool_heavy_transcript(turns: int = 100, seed: int = 0) -> Transcript:
    """The conversation of ``tool_heavy(turns, seed)`` as a transcript (see the module's
    promises), for the store-level replay of ``memevict simulate``."""
    c = tool_heavy(turns, seed)
    events: list[MemoryTurn] = []
    asked: dict[int, int] = {}  # turn -> the time of its user message
    for t in c.turns:
        at = START_MS + 4 * t.index * TURN_MS
        asked[t.index] = at
        status = "error" if t.failed else None
        events += [
            MemoryTurn(f"u{t.index}", None, at, text=t.user, role="user"),
            MemoryTurn(
                f"c{t.index}", None, at + TURN_MS, text=f"{t.call.name}({t.call.json})",
                role="assistant", kind="function_call",
            ),
            MemoryTurn(
                f"o{t.index}", None, at + 2 * TURN_MS, text=t.result, role="tool",
                kind="function_call_output", tool_status=status,
            ),
            MemoryTurn(f"a{t.index}", None, at + 3 * TURN_MS, text=t.answer, role="assistant"),
        ]  # fmt: skip
    why = "Why did the card payment fail?"
    questions = [Question(why, (f"o{c.error_at}",), asked[n]) for n in c.needs_error]
    evidence = (f"o{c.value_at}", f"a{c.value_at}")
    questions.append(Question("What is the refund reference?", evidence, asked[c.value_again_at]))
    return Transcript(
        tuple(events), f"tool-heavy agent (seed {seed}, {turns} turns)", tuple(questions)
    )
