from __future__ import annotations

import pytest

from budget_hook.budget import BudgetPolicy, compute_budget, requested_output_tokens
from budget_hook.errors import MalformedRequestError, OutputReserveTooLargeError, PolicyError


def test_policy_default_reserve_is_15_percent_within_bounds():
    assert compute_budget(128_000).output_reserve == 4096  # 15% = 19,200, capped at 4,096
    assert compute_budget(8_000).output_reserve == 1200
    assert compute_budget(2_000).output_reserve == 500  # 15% = 300, raised to the 500 minimum


def test_budget_terms():
    budget = compute_budget(128_000)
    assert (budget.window, budget.safety_margin, budget.budget) == (128_000, 6400, 128_000 - 4096 - 6400)
    assert budget.output_reserve_source == "policy"
    capped = compute_budget(128_000, policy=BudgetPolicy(max_input_tokens=50_000))
    assert capped.budget == 50_000 and capped.cap == 50_000


def test_request_max_tokens_is_the_reserve():
    budget = compute_budget(200_000, requested_output_tokens=64_000)
    assert budget.output_reserve == 64_000 and budget.output_reserve_source == "request"
    assert budget.budget == 200_000 - 64_000 - 10_000


def test_requested_output_tokens_takes_the_largest_value_sent():
    assert requested_output_tokens({"max_tokens": 10, "max_completion_tokens": 20}) == 20
    assert requested_output_tokens({"max_tokens": 100_000, "max_completion_tokens": 1}) == 100_000
    assert requested_output_tokens({"max_tokens": "3000"}) == 3000  # read as servers that accept strings read it
    for bad in ("lots", True, -1, float("inf"), 10**30):  # never replaced by a default: a 400 naming the field
        with pytest.raises(MalformedRequestError, match="^max_tokens: "):
            requested_output_tokens({"max_tokens": bad})
    assert requested_output_tokens({}) is None and requested_output_tokens({"max_tokens": None}) is None


def test_check_carries_every_term():
    check = compute_budget(10_000).check(12_000)
    data = check.as_dict()
    assert not check.fits and check.over_by == 12_000 - check.budget.budget
    assert set(data) >= {"window", "output_reserve", "safety_margin", "cap", "budget", "counted_tokens", "over_by"}


def test_max_tokens_that_leaves_no_room_is_impossible_with_numbers():
    with pytest.raises(OutputReserveTooLargeError) as info:
        compute_budget(128_000, requested_output_tokens=128_000)
    assert "128000" in str(info.value) and "max_tokens" in str(info.value)
    assert info.value.facts["output_reserve"] == 128_000 and info.value.code == "context_length_exceeded"


@pytest.mark.parametrize(
    "kwargs",
    [{"output_reserve_ratio": 1.5}, {"safety_margin_ratio": -0.1}, {"output_reserve_min": 10, "output_reserve_max": 5},
     {"max_input_tokens": 0}],
)
def test_bad_policy_values_are_rejected(kwargs):
    with pytest.raises(PolicyError):
        BudgetPolicy(**kwargs)
