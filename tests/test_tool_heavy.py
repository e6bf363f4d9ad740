"""The tool-heavy conversation (memevict.simulate.tool_heavy): each promise of its docstring,
at the default 100 turns and at the smallest size, for a few seeds. Plain data: no server.
(benchmarks/tool_heavy.py, which replays it through the adapters, is smoke-run in
tests/test_bench.py.)"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import Counter

import pytest

from memevict.simulate.tool_heavy import (
    CARD,
    ERROR_AT,
    MIN_TURNS,
    PAYMENT_REASON,
    TOOLS,
    VALUE_AT,
    tool_heavy,
)

CASES = [(100, 0), (100, 1), (100, 7), (MIN_TURNS, 0), (12, 3), (37, 2)]


@pytest.mark.parametrize(("turns", "seed"), CASES)
def test_every_promise(turns: int, seed: int) -> None:
    c = tool_heavy(turns, seed)
    assert [t.index for t in c.turns] == list(range(turns))
    for t in c.turns:
        # one call of a known tool, string arguments its parameters name, in their order
        spec = TOOLS[t.call.name]
        assert [name for name, _ in t.call.args] == list(spec.params)
        assert all(isinstance(v, str) and v for _, v in t.call.args)
        assert json.loads(t.call.json) == t.call.arguments
        assert (t.output is None) != (t.error is None) and t.result in (t.output, t.error)
    kinds = Counter(t.kind for t in c.turns)
    assert kinds["routine"] > max(1, turns // 2 if turns >= 37 else 1)
    for t in c.turns:
        if t.kind == "routine":
            assert not t.failed and any(ch.isdigit() for ch in str(t.output))

    # retries: a transient failure, then the same call, which succeeds
    transient = [t for t in c.turns if t.kind == "transient"]
    assert len(transient) >= turns // 20
    for t in transient:
        retry = c.turns[t.index + 1]
        assert t.failed and retry.kind == "retry" and retry.call == t.call and not retry.failed
    assert kinds["retry"] == len(transient)

    # the payment error: the reason only in the error, and in the answers that need it
    error = c.turns[ERROR_AT]
    assert c.error_at == ERROR_AT and error.kind == "payment_error" and error.failed
    assert error.call.name == "charge_card" and c.error == error.error
    assert PAYMENT_REASON in c.error and CARD in c.error and "402" in c.error
    assert PAYMENT_REASON not in error.answer
    assert c.needs_error and all(ERROR_AT < t < turns - 1 for t in c.needs_error)
    assert len(c.needs_error) == 3 or turns < 20
    for t in c.turns:
        said = [t.user, t.call.json, t.result, t.answer]
        if t.index in c.needs_error:
            assert t.kind == "needs_error" and PAYMENT_REASON in t.answer
            assert PAYMENT_REASON not in t.result
        elif t.index != ERROR_AT:
            assert not any(PAYMENT_REASON in text for text in said), t

    # the value asked for later
    assert (c.value_at, c.value_again_at) == (VALUE_AT, turns - 1)
    asked, again = c.turns[VALUE_AT], c.turns[-1]
    assert asked.kind == "value" and again.kind == "value_again"
    assert c.value in str(asked.output) and c.value in asked.answer
    assert c.value not in again.user and c.value not in again.result and c.value in again.answer
    for t in c.turns[:-1]:
        if t.index != VALUE_AT:
            assert not any(c.value in text for text in (t.user, t.call.json, t.result, t.answer))

    # every user text and answer said once
    assert len(c.turn_of_user()) == len(c.turn_of_answer()) == turns


def test_the_same_arguments_give_the_same_conversation_in_any_process() -> None:
    code = (
        "import dataclasses, json; from memevict.simulate.tool_heavy import tool_heavy; "
        "print(json.dumps(dataclasses.asdict(tool_heavy(100, 5))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    again = json.loads(done.stdout)
    ours = json.loads(json.dumps(dataclasses.asdict(tool_heavy(100, 5))))
    assert again == ours and tool_heavy(100, 5) == tool_heavy(100, 5)
    other = tool_heavy(100, 6)
    assert other.value != tool_heavy(100, 5).value
    assert [t.kind for t in other.turns] == [t.kind for t in tool_heavy(100, 5).turns]
    assert [t.user for t in other.turns] != [t.user for t in tool_heavy(100, 5).turns]


def test_too_few_turns_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        tool_heavy(MIN_TURNS - 1)
