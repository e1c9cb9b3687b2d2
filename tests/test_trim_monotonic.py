"""A budget that trims must not be refused while a smaller one trims (a review, 2026-12-06: a Gemini body written
back from its trimmed view counts a few tokens more than the view; the shape aimed the view lower by the excess,
and when that aim could not be reached it refused, so budgets 2,126-2,131 were refused while 2,118-2,125 and every
larger one trimmed). Between an aim the view cannot reach and one whose body is over, the shape now tries the aims
in between (``ConversationShape.trim``)."""

from __future__ import annotations

from budget_hook import TokenCounter, TrimPolicy, compute_budget
from budget_hook.budget import BudgetPolicy
from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES


def text(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i} value={i * 7} path=src/{tag}/m{i}.py;" for i in range(n))


BODY = {
    "systemInstruction": {"parts": [{"text": "You are a helpful agent."}]},
    "contents": [
        {"role": "user", "parts": [{"text": text(90, "task")}]},
        {"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"q": "a"}}},
                                    {"functionCall": {"name": "grep", "args": {"q": "b"}}},
                                    {"functionCall": {"name": "run", "args": {"q": "c"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read", "response": {"content": "ok"}}},
                                   {"functionResponse": {"name": "grep", "response": {"content": text(80, "g")}}},
                                   {"functionResponse": {"name": "run", "response": {"content": text(80, "r")}}}]},
    ],
}


def test_a_larger_budget_is_never_refused_where_a_smaller_one_trims():
    shape, counter = SHAPES.get("gemini"), TokenCounter.for_model("gemini/gemini-2.5-pro")
    trimmed = []
    for cap in range(2100, 2200):
        budget = compute_budget(10**6, requested_output_tokens=0,
                                policy=BudgetPolicy(max_input_tokens=cap, safety_margin_ratio=0))
        try:
            result = shape.trim(BODY, counter=counter, budget=budget, policy=TrimPolicy())
        except CannotFitError:
            assert not trimmed, f"refused at {cap} while {trimmed[0]} trimmed"
            continue
        assert shape.count(result.request, counter) == result.report.tokens_after <= cap
        trimmed.append(cap)
    assert trimmed and trimmed[0] <= 2118
