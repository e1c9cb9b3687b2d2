"""Tests that close the mutants ``python bench/mutate.py`` found surviving the unit suite: each pins a boundary,
an operator or an order of the core that no other unit test looked at (budget/compute.py, policy/layers.py,
trimming/structure.py, trimming/report.py). Fast on purpose: the mutation pass runs this file first."""

from __future__ import annotations

import math

import pytest

from budget_hook.budget import BudgetPolicy, compute_budget, requested_output_tokens, with_output_tokens
from budget_hook.budget.compute import MAX_OUTPUT_TOKENS, output_tokens
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError, MalformedRequestError, OutputReserveTooLargeError, PolicyError
from budget_hook.policy import Policy
from budget_hook.policy.layers import RESOLVED_KEPT
from budget_hook.policy.settings import load_settings
from budget_hook.trimming.report import (
    all_text,
    cannot_fit,
    check_native_fit,
    content_chars,
    is_image,
    message_text,
    notice_text,
)
from budget_hook.trimming.structure import is_acknowledgement, latest_turn_start, opening_parts, pairing_problems

NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0, output_reserve_min=0)

# --- budget/compute.py -------------------------------------------------------------------------------------


def test_the_largest_output_allowance_is_the_32_bit_limit():
    assert MAX_OUTPUT_TOKENS == 2**31 - 1
    assert output_tokens(2**31 - 1, "max_tokens") == 2**31 - 1
    assert output_tokens(str(2**31 - 1), "max_tokens") == 2**31 - 1
    with pytest.raises(MalformedRequestError, match="max_tokens"):
        output_tokens(2**31, "max_tokens")


def test_an_allowance_of_zero_and_fractions_and_floats_are_read_as_the_provider_reads_them():
    assert output_tokens(0, "max_tokens") == 0 and output_tokens(0.0, "max_tokens") == 0
    assert output_tokens(0.5, "max_tokens") == 1 and output_tokens(3000.0, "max_tokens") == 3000
    assert output_tokens(" 3000.0 ", "max_tokens") == 3000 and output_tokens(7, "max_tokens") == 7
    for bad in (math.inf, -math.inf, math.nan, -1, -0.5):
        with pytest.raises(MalformedRequestError, match="max_tokens"):
            output_tokens(bad, "max_tokens")


def test_a_numeric_string_of_up_to_40_characters_is_a_number():
    forty = "3000".rjust(40)
    assert len(forty) == 40 and output_tokens(forty, "max_tokens") == 3000
    with pytest.raises(MalformedRequestError, match="max_tokens"):
        output_tokens("3000".rjust(41), "max_tokens")


def test_extra_body_allowances_count_and_the_top_level_one_is_named_first():
    assert requested_output_tokens({"max_tokens": 10, "extra_body": {"max_tokens": 20}}) == 20
    assert requested_output_tokens({"max_tokens": 30, "extra_body": {"max_tokens": 20}}) == 30
    assert requested_output_tokens({"extra_body": {"max_completion_tokens": 5}}) == 5
    with pytest.raises(MalformedRequestError) as caught:
        requested_output_tokens({"max_tokens": 10, "extra_body": {"max_tokens": "lots"}})
    assert caught.value.field == "extra_body.max_tokens"
    with pytest.raises(MalformedRequestError) as caught:  # both bad: the top level is read first
        requested_output_tokens({"max_tokens": "lots", "extra_body": {"max_tokens": "lots"}})
    assert caught.value.field == "max_tokens"


def test_clamping_lowers_only_allowances_above_the_value_and_adds_none():
    fields = ("max_completion_tokens", "max_tokens")
    request = {"max_tokens": 9000, "extra_body": {"max_completion_tokens": 100}}
    lowered = with_output_tokens(request, fields, 4096)
    assert lowered == {"max_tokens": 4096, "extra_body": {"max_completion_tokens": 100}}
    assert request == {"max_tokens": 9000, "extra_body": {"max_completion_tokens": 100}}  # not touched
    assert with_output_tokens({"max_tokens": 4096}, fields, 4096) == {"max_tokens": 4096}
    assert "max_completion_tokens" not in with_output_tokens({"max_tokens": 9000}, fields, 10)
    assert with_output_tokens({"max_tokens": 4097}, fields, 4096)["max_tokens"] == 4096
    assert with_output_tokens({"max_tokens": "4096"}, fields, 4096) == {"max_tokens": "4096"}  # equal: as sent


def test_a_window_of_one_token_is_a_window_and_zero_is_not():
    assert compute_budget(1, requested_output_tokens=0, policy=NO_MARGIN).budget == 1
    with pytest.raises(PolicyError, match="window must be positive"):
        compute_budget(0, requested_output_tokens=0, policy=NO_MARGIN)


def test_a_budget_of_one_token_is_a_budget_and_zero_is_refused():
    assert compute_budget(1000, requested_output_tokens=999, policy=NO_MARGIN).budget == 1
    with pytest.raises(OutputReserveTooLargeError):
        compute_budget(1000, requested_output_tokens=1000, policy=NO_MARGIN)


def test_a_request_fits_exactly_at_the_budget():
    budget = compute_budget(1000, requested_output_tokens=0, policy=NO_MARGIN)
    assert budget.check(1000).fits and budget.check(1000).over_by == 0
    assert not budget.check(1001).fits and budget.check(1001).over_by == 1
    assert budget.check(10).over_by == 0


def test_the_budget_knobs_take_their_documented_defaults_and_bounds():
    policy = BudgetPolicy()
    assert (policy.output_reserve_ratio, policy.output_reserve_min, policy.output_reserve_max,
            policy.safety_margin_ratio, policy.max_input_tokens, policy.clamp_max_tokens,
            policy.max_tokens_floor) == (0.15, 500, 4096, 0.05, None, False, 4096)
    assert BudgetPolicy(output_reserve_min=0, output_reserve_max=0).output_reserve_max == 0  # ge=0, and min == max
    assert BudgetPolicy(output_reserve_min=700, output_reserve_max=700).output_reserve_min == 700
    assert BudgetPolicy(max_tokens_floor=1).max_tokens_floor == 1
    assert BudgetPolicy(safety_margin_ratio=0.99).safety_margin_ratio == 0.99
    for bad in ({"safety_margin_ratio": 1}, {"output_reserve_ratio": 1}, {"max_tokens_floor": 0},
                {"output_reserve_min": -1, "output_reserve_max": 0}, {"output_reserve_min": 701, "output_reserve_max": 700}):
        with pytest.raises(PolicyError):
            BudgetPolicy(**bad)


# --- policy/layers.py --------------------------------------------------------------------------------------


def _layers(**raw):
    return load_settings(raw).layers


def test_the_policy_knobs_take_their_documented_defaults_and_bounds():
    policy = Policy()
    assert (policy.mode, policy.fail_mode, policy.unknown_window, policy.default_max_input_tokens,
            policy.unreadable_content, policy.provider_count, policy.provider_count_timeout_ms) == \
        ("enforce", "open", "default", 8192, "estimate", "off", 500)
    assert Policy(default_max_input_tokens=1).default_max_input_tokens == 1
    assert Policy(provider_count_timeout_ms=1).provider_count_timeout_ms == 1
    assert Policy(provider_count_timeout_ms=10_000).provider_count_timeout_ms == 10_000
    for bad in ({"default_max_input_tokens": 0}, {"provider_count_timeout_ms": 0},
                {"provider_count_timeout_ms": 10_001}):
        with pytest.raises(PolicyError):
            Policy(**bad)


def test_a_model_layer_without_a_pattern_matches_only_its_own_name():
    config = _layers(models={"gpt-4o": {"max_input_tokens": 1000}, "claude-*": {"max_input_tokens": 2000}})
    assert config.resolve(model_group="gpt-4o-mini").policy.budget.max_input_tokens is None
    assert config.resolve(model_group="claude-x").policy.budget.max_input_tokens == 2000
    assert config.resolve(model_group="gpt-4o").policy.budget.max_input_tokens == 1000


def test_one_routed_group_without_a_layer_leaves_the_layer_of_the_name_asked_for():
    """Tightening across routed groups is for two or more of them; one routed group without a layer of its
    own is the name asked for's policy, not the base's."""
    config = _layers(max_input_tokens=5000, models={"a": {"max_input_tokens": 50_000}})
    assert config.resolve(model_group="a", routed_groups=("b",)).policy.budget.max_input_tokens == 50_000
    assert config.resolve(model_group="a", routed_groups=("b", "c")).policy.budget.max_input_tokens == 5000


def test_a_client_cap_equal_to_the_operators_is_not_applied_and_nothing_sent_is_the_same_policy():
    resolved = _layers(max_input_tokens=5000).resolve(model_group="m")
    equal = resolved.with_client_cap(5000)
    assert not equal.client_cap_applied and "client_cap" not in equal.sources
    assert resolved.with_client_cap(4999).client_cap_applied
    assert resolved.with_client_cap(None) is resolved
    assert resolved.with_client_cap(None, ("mode",)).ignored_client_settings == ("mode",)


def test_resolved_policies_kept_are_bounded():
    config = _layers()
    for number in range(RESOLVED_KEPT + 1):
        config.resolve(model_group=f"g{number}")
    assert len(config._resolved) <= RESOLVED_KEPT


def test_every_pair_of_overrides_is_validated_in_precedence_order_at_start_up():
    """With three sections, the model entry and the team entry conflict only in that order (the team's
    ``output_reserve_max`` over the model's bounds): start-up names that pair."""
    raw = {"models": {"a": {"output_reserve_min": 900, "output_reserve_max": 1000}},
           "teams": {"t": {"output_reserve_max": 600}}, "keys": {"k": {"mode": "shadow"}}}
    with pytest.raises(PolicyError, match=r"models\[a\] with teams\[t\]"):
        load_settings(raw)


# --- trimming/report.py ------------------------------------------------------------------------------------


def test_a_native_request_exactly_at_the_budget_fits():
    budget = compute_budget(1000, requested_output_tokens=0, policy=NO_MARGIN)
    check_native_fit(TokenCounter.for_model("gpt-4o"), budget, 2000, 1000, remedy="")
    with pytest.raises(CannotFitError):
        check_native_fit(TokenCounter.for_model("gpt-4o"), budget, 2000, 1001, remedy="")


def test_the_refusal_lists_its_remedies_in_the_documented_order():
    budget = compute_budget(2000, requested_output_tokens=500)
    error = cannot_fit("g", budget, 9000, 8000, {"latest_turn": 10, "tool_definitions": 5, "opening_context": 3})
    assert str(error).endswith("Shorten the latest message or its tool output; send fewer tool definitions; send "
                               "fewer files or a shorter system prompt; lower max_tokens; use a model with a larger "
                               "context window; or an operator can let the gateway drop or reduce the opening context "
                               "(drop_opening_context, reduce_opening_context, keep_opening_context).")


def test_the_refusal_names_the_model_the_largest_part_and_what_is_missing_as_zero():
    budget = compute_budget(2000, requested_output_tokens=0)
    error = str(cannot_fit("g", budget, 9000, 8000, {"latest_turn": 0, "system": 0, "tool_definitions": 0}))
    assert error.startswith("g: the request needs 8000 input tokens after trimming (it had 9000)")
    assert "opening context 0 tokens; the largest is the latest turn." in error
    assert "lower max_tokens" not in error  # no output reserve to lower
    system_only = str(cannot_fit("", budget, 9000, 8000, {"system": 7000}))
    assert system_only.startswith("model: ") and "Send fewer files or a shorter system prompt;" in system_only
    assert "the largest is the system." in system_only and "shorten the latest" not in system_only.lower()


def test_the_notice_counts_messages_in_the_singular_and_plural():
    assert "removed 1 earlier message (~10 tokens)" in notice_text(1, 10)
    assert "removed 2 earlier messages (~10 tokens)" in notice_text(2, 10)


def test_message_text_reads_only_text_parts_with_text():
    message = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": 5},
                                           "loose", {"type": "text", "text": "b"}]}
    assert message_text(message) == "ab"


def test_what_reads_as_text_and_what_is_an_image():
    assert all_text({"content": "hi"}) and all_text({"content": [{"type": "text", "text": "a"}]})
    assert not all_text({"content": []}) and not all_text({"content": None})
    assert not all_text({"content": [{"type": "image_url", "image_url": {"url": "x"}}]})
    assert is_image({"type": "image_url"}) and is_image({"type": "input_image"}) and is_image({"type": "image"})
    assert not is_image({"type": "text", "text": "a"}) and not is_image("image_url") and not is_image(None)


def test_a_message_without_content_has_no_characters():
    assert content_chars({"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}) == 0
    assert content_chars({"role": "user", "content": "abc"}) == 3


# --- trimming/structure.py ---------------------------------------------------------------------------------


def test_without_a_user_message_the_latest_turn_is_everything():
    assert latest_turn_start([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]) == 0
    assert latest_turn_start([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                              {"role": "user", "content": "q2"}]) == 2
    assert latest_turn_start([{"role": "user", "content": "q"}, {"role": "user", "content": "q2"},
                              {"role": "assistant", "content": "a"}]) == 1


def test_an_acknowledgement_is_a_short_plain_reply_of_assent():
    assert is_acknowledgement({"role": "assistant", "content": "Ok."}, 200)
    assert is_acknowledgement({"role": "assistant", "content": [{"type": "text", "text": "Sure, noted."}]}, 200)
    assert is_acknowledgement({"role": "assistant", "content": "Ok" + "." * 198}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": "Ok" + "." * 199}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": "Ok.", "tool_calls": [{"id": "c"}]}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": "Ok.", "function_call": {"name": "f"}}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": "Ok ```rm -rf build```"}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": "Here is the fix."}, 200)
    assert not is_acknowledgement({"role": "assistant", "content": [{"type": "text", "text": "Ok"},
                                                                     {"type": "image_url", "image_url": {"url": "x"}}]}, 200)


def test_a_function_result_needs_the_function_call_right_before_it():
    call = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    result = {"role": "function", "name": "f", "content": "42"}
    assert pairing_problems([{"role": "user", "content": "q"}, call, result]) == []
    assert pairing_problems([{"role": "user", "content": "q"}, result]) == [
        "messages[1] is a function result without a preceding function_call"]
    assert pairing_problems([result, {"role": "user", "content": "q"}]) == []  # nothing before it to check


def test_acknowledged_context_is_a_long_user_message_and_the_reply_right_after_it():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "the task"},
                {"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "file " * 200},
                {"role": "assistant", "content": "Ok."}, {"role": "user", "content": "the question"}]
    assert opening_parts(messages, context_min_chars=500, ack_max_chars=200) == (frozenset({0, 1}), ((3, 4),))
    assert opening_parts(messages, context_min_chars=1000, ack_max_chars=200)[1] == ((3, 4),)  # at least 1,000
    assert opening_parts(messages, context_min_chars=1001, ack_max_chars=200) == (frozenset({0, 1}), ())
