"""What a review of the trimmer's properties found (2026-12-06), as a property of the forwarded request:

* a step dropped early comes back when a later, larger drop freed the room it needs (forwarded at 20% of the
  budget before).
"""

from __future__ import annotations

import json
import random

from budget_hook import TokenCounter, TrimPolicy, compute_budget
from budget_hook.budget import BudgetPolicy
from budget_hook.shapes import SHAPES

WORDS = ["alpha", "beta", "gamma", "delta", "file", "line", "error", "value", "result", "token", "config", "path",
         "module", "test", "func", "data", "status"]
CHAT, GPT = SHAPES.get("chat"), TokenCounter.for_model("gpt-4o")


def cap(tokens: int):
    return compute_budget(10**6, requested_output_tokens=0,
                          policy=BudgetPolicy(max_input_tokens=tokens, safety_margin_ratio=0))


class Conversation:
    def __init__(self, seed: int) -> None:
        self.rng, self.calls = random.Random(seed), 0

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def step(self, *sizes: int) -> list[dict]:
        ids = [f"call_{self.calls + k}" for k in range(len(sizes))]
        self.calls += len(sizes)
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "read", "arguments": json.dumps({"q": "x"})}}
            for i in ids]}] + [{"role": "tool", "tool_call_id": i, "content": self.words(n)} for i, n in zip(ids, sizes)]


def test_a_step_dropped_early_comes_back_when_a_later_drop_frees_its_room():
    c = Conversation(3)
    messages = ([{"role": "system", "content": c.words(280)}, {"role": "user", "content": c.words(370)}]
                + c.step(2550) + c.step(7850, 2600)
                + [{"role": "assistant", "content": c.words(10)}, {"role": "user", "content": c.words(405)},
                   {"role": "assistant", "content": c.words(8)}, {"role": "user", "content": c.words(13)}]
                + c.step(8))
    messages[5]["content"] = "Error: " + messages[5]["content"]
    # the newest results are not cut (an error among them would now be cut, head and tail, before its step leaves)
    result = CHAT.trim({"model": "gpt-4o", "messages": messages}, counter=GPT, budget=cap(5800),
                       policy=TrimPolicy(reduce_recent_tool_results=False))
    assert messages[3] in result.request["messages"]  # step A, 2,554 tokens: the room holds it
    assert result.report.tokens_after > 0.6 * 5800
