"""The gateway's own ``retry_policy``: no call of a budgeted request is sent again without the hooks.

LiteLLM's client wrapper answers the refusal of a call it does not take for the router's by calling the unwrapped
function again, as often as the call's ``retry_policy`` grants (read before its ``num_retries``). LiteLLM 1.103 takes a
Responses router attempt for such a call (it looks for ``model_group`` in ``metadata``; the router writes
``litellm_metadata``): a fallback's refused 12,011 tokens reached an 8,000-token deployment twice, for its
``num_retries`` (``tests/e2e/test_call_again_e2e.py`` shows it through a real proxy). The pre-call hook forwards every
request with a policy that grants none; a client's own, anywhere LiteLLM would merge it into a call, is a 400.
"""

from __future__ import annotations

import asyncio
import copy
import logging

import litellm
import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget_hook.pipeline.bounds import fallback_targets, gateway_parameters, prompt_parameter
from budget_hook.proxy.attempts import lasting_refusal
from budget_hook.proxy.hook import BudgetHookHTTPError
from budget_hook.proxy.route_guard import forwarded_body

from .conftest import as_it_is
from .test_proxy_hook import attempt_kwargs, make_plugin, run_hook

OURS = gateway_parameters()["retry_policy"]
CLIENTS = {"DefaultRetries": 3}
REFUSALS = [litellm.ContextWindowExceededError(message="budget_hook blocked", model="m", llm_provider="budget_hook"),
            litellm.BadRequestError(message="budget_hook: invalid request", model="m", llm_provider="budget_hook"),
            litellm.RateLimitError(message="rate", model="m", llm_provider="openai"), RuntimeError("any other")]


@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda e: type(e).__name__)
def test_litellm_s_client_wrapper_grants_no_retry_for_the_gateway_s_policy(monkeypatch, refusal):
    """What the installed LiteLLM's wrapper reads (``utils._get_wrapper_num_retries``), for any error: the call's and
    the operator's ``num_retries`` give way to the policy, which grants none; a client's grants its own."""
    from litellm.utils import _get_wrapper_num_retries

    monkeypatch.setattr(litellm, "num_retries", 3)
    assert _get_wrapper_num_retries({"num_retries": 2, "retry_policy": gateway_parameters()["retry_policy"]},
                                    refusal)[0] == 0
    assert _get_wrapper_num_retries({"retry_policy": gateway_parameters()["retry_policy"]}, refusal)[0] == 0
    assert _get_wrapper_num_retries({"retry_policy": dict(CLIENTS)}, refusal)[0] == 3
    assert _get_wrapper_num_retries({"num_retries": 2}, refusal)[0] == 2  # what the policy replaces


def test_every_request_the_pre_call_hook_forwards_carries_it_and_the_client_s_body_is_untouched():
    plugin = make_plugin(4000)
    fits = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
    out = run_hook(plugin, fits)
    assert as_it_is(out, fits) and "retry_policy" not in fits
    assert out["retry_policy"] is not run_hook(plugin, dict(fits, litellm_call_id="2"))["retry_policy"]  # a copy each
    long = {"model": "g", "messages": [{"role": "user", "content": f"q{n} " + "word " * 400} for n in range(30)]}
    trimmed = run_hook(plugin, long)
    assert trimmed["retry_policy"] == OURS and len(trimmed["messages"]) < 30 and "retry_policy" not in long
    assert run_hook(plugin, {"model": "g", "input": "hi"}, call_type="aresponses")["retry_policy"] == OURS
    assert run_hook(plugin, {"model": "g", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
                    call_type="anthropic_messages")["retry_policy"] == OURS


@pytest.mark.parametrize("how", ["mode off", "failed open"])
def test_a_request_let_through_undecided_carries_it_too(monkeypatch, how):
    """A review: with ``mode: off`` on the first group, its fallback to an enforced group was refused on the attempt
    and sent again by LiteLLM 1.103 for the deployment's ``num_retries``. So is a request the plugin failed open on."""
    from budget_hook.proxy import hook

    if how == "mode off":
        plugin = make_plugin(4000, models={"g": {"mode": "off"}})
    else:
        plugin = make_plugin(4000, fail_mode="open")

        def broken(*args, **kwargs):
            raise RuntimeError("a bug of ours")
        monkeypatch.setattr(hook, "decide", broken)
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
    out = run_hook(plugin, data)
    assert out["retry_policy"] == OURS and out["messages"] is data["messages"] and "retry_policy" not in data


@pytest.mark.parametrize("how", ["mode off", "shadow", "failed open", "enforce"])
def test_a_client_s_retry_policy_is_a_400_in_every_mode(monkeypatch, how):
    """A second review: a group whose mode is off or shadow can fall back to one the gateway enforces; a client's
    ``retry_policy`` merged into that fallback call from its target made LiteLLM 1.103 send the refused attempt again,
    three times for ``DefaultRetries: 3``. Checked before the decision, in every mode (not for a pass-through body,
    which LiteLLM sends without reading it)."""
    from budget_hook.proxy import hook

    plugin = make_plugin(4000, **({"mode": "off"} if how == "mode off" else {"mode": "shadow"} if how == "shadow"
                                  else {}))
    if how == "failed open":
        def broken(*args, **kwargs):
            raise RuntimeError("a bug of ours")
        monkeypatch.setattr(hook, "decide", broken)
    for fallbacks, path in (([{"model": "g2", "retry_policy": CLIENTS}], "fallbacks[0].retry_policy"),
                            ([{"model": "g2", "retry_policy": None}], "fallbacks[0].retry_policy"),
                            ([{"g": [{"model": "g2", "retry_policy": CLIENTS}], "x": 1}], "fallbacks[0].g[0].retry_policy")):
        data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "fallbacks": fallbacks}
        with pytest.raises(BudgetHookHTTPError) as caught:
            run_hook(plugin, data)
        assert caught.value.status_code == 400 and caught.value.param == path
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "retry_policy": CLIENTS}
    with pytest.raises(BudgetHookHTTPError):
        run_hook(plugin, data)
    assert run_hook(plugin, {**data, "retry_policy": None})["retry_policy"] == OURS  # written over: nothing lost
    if how != "enforce":  # a pass-through body, which LiteLLM sends as it is (enforce refuses its LiteLLM parameters
        passed = run_hook(plugin, dict(data), call_type="pass_through_endpoint")  # alike, as the decision reads them)
        assert passed is None or passed["retry_policy"] == CLIENTS


def test_a_pass_through_body_goes_to_the_provider_as_it_is():
    body = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "metadata": {}}
    assert forwarded_body(body, body, "metadata", "pass_through_endpoint") is body
    trimmed = {"model": "g", "messages": []}
    assert forwarded_body(body, trimmed, "metadata", "pass_through_endpoint") == {**trimmed, "metadata": {}}
    assert forwarded_body(body, body, "metadata", "acompletion") == {**body, "retry_policy": OURS}


def test_a_refused_call_carrying_it_is_neither_mocked_nor_said_to_be_sent_again(caplog):
    """``attempts.lasting_refusal``: the refusal travels in the kwargs, or a WARNING says LiteLLM will send it again,
    only when the wrapper would call again; the gateway's policy stops that. A ``context_window_fallback_dict`` still
    does."""
    refusal = REFUSALS[0]
    inner = {"model": "groq/x", "messages": [], "num_retries": 2, "retry_policy": gateway_parameters()["retry_policy"]}
    attempt = {"model": "openai/x", "input": "hi", "litellm_metadata": {"model_group": "small"}, "num_retries": 2,
               "retry_policy": gateway_parameters()["retry_policy"]}
    with caplog.at_level(logging.WARNING, logger="budget_hook"):
        for kwargs, call_type in ((inner, "acompletion"), (attempt, "aresponses")):
            with pytest.raises(litellm.ContextWindowExceededError):
                lasting_refusal(kwargs, call_type, refusal, retries=2)
    assert "router_settings" not in caplog.text
    assert lasting_refusal({**inner, "context_window_fallback_dict": {"groq/x": "groq/y"}}, "acompletion", refusal,
                           retries=None)["mock_response"] is refusal
    # without it (a call the gateway's policy does not reach), as before
    assert lasting_refusal({**inner, "retry_policy": None}, "acompletion", refusal, retries=None)["mock_response"] \
        is refusal
    with caplog.at_level(logging.WARNING, logger="budget_hook"), pytest.raises(litellm.ContextWindowExceededError):
        lasting_refusal({**attempt, "retry_policy": dict(CLIENTS)}, "aresponses", refusal, retries=None)
    assert "router_settings" in caplog.text


def test_an_attempt_carrying_it_is_decided_as_usual_and_one_carrying_a_client_s_is_refused(monkeypatch):
    from budget_hook.proxy import hook

    router = type("Router", (), {"default_litellm_params": {}, "model_list": [
        {"model_name": "g", "model_info": {"id": "dep-op"},
         "litellm_params": {"model": "openai/x", "retry_policy": {"RateLimitErrorRetries": 2}}}]})()
    monkeypatch.setattr(hook, "_router", lambda: router)
    plugin = make_plugin(4000)
    out = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    assert asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "small"), "acompletion")) is None
    # a client's, merged by the router from a target the pre-call check could not see (a key's settings, say)
    client = {**attempt_kwargs(out, "small"), "retry_policy": dict(CLIENTS)}
    routed = {**client, "metadata": {**client["metadata"], "model_group": "g"}}
    with pytest.raises(BudgetHookHTTPError) as caught:
        asyncio.run(plugin.async_pre_call_deployment_hook(routed, "acompletion"))
    assert caught.value.status_code == 400 and caught.value.param == "retry_policy"
    assert "router_settings" in caught.value.message
    # the deployment's own is the operator's
    operator = {**attempt_kwargs(out, "g", "dep-op"), "retry_policy": {"RateLimitErrorRetries": 2}}
    assert asyncio.run(plugin.async_pre_call_deployment_hook(operator, "acompletion")) is None


# --- where a client's could hide: every fallback target LiteLLM merges into a call ------------------------------

FIELDS = ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks")


@st.composite
def fallback_tree(draw, depth: int = 3):
    """A fallback field's value: targets as names, as parameters (``{"model": ...}``, with fallbacks of their own),
    and in the router's format (``{"group": [targets]}``)."""
    items = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["name", "target", "router"] if depth else ["name", "target"]))
        if kind == "name":
            items.append(draw(st.sampled_from(["g", "g2"])))
        elif kind == "target":
            target = {"model": draw(st.sampled_from(["g", "g2"]))}
            if depth and draw(st.booleans()):
                target[draw(st.sampled_from(FIELDS))] = draw(fallback_tree(depth - 1))
            items.append(target)
        else:  # LiteLLM reads the first key of such an entry, whatever else it holds
            entry = {draw(st.sampled_from(["g", "big", "*"])): draw(fallback_tree(depth - 1))}
            items.append({**entry, **draw(st.sampled_from([{}, {"x": 1}, {"model": "g2"}]))})
    return items


@given(st.dictionaries(st.sampled_from(FIELDS), fallback_tree(), max_size=3), st.booleans(),
       st.sampled_from([CLIENTS, None, {}, 0, {"DefaultRetries": None}]), st.data())
def test_a_client_s_retry_policy_in_any_fallback_target_is_named(fields, in_override, policy, data):
    """Any value: LiteLLM merges a target over the call's kwargs, so even ``null`` takes the gateway's away (a review
    sent a refused body twice so)."""
    body = {"model": "g", "messages": [], **({"router_settings_override": fields} if in_override else fields)}
    targets = list(fallback_targets(body))
    assert prompt_parameter(body) is None  # nothing set: nothing named
    if not targets:
        return
    path, target = data.draw(st.sampled_from(targets))
    target["retry_policy"] = copy.deepcopy(policy)  # the target object itself, inside the body
    named = prompt_parameter(body)
    assert named == path + "retry_policy"
    assert named.startswith("router_settings_override.") == in_override
    target["retry_policy"] = gateway_parameters()["retry_policy"]  # the gateway's own grants nothing: not named
    assert prompt_parameter(body) is None


def test_the_paths_say_where_the_target_is():
    body = {"model": "g", "fallbacks": ["g2", {"model": "g3", "retry_policy": CLIENTS}]}
    assert prompt_parameter(body) == "fallbacks[1].retry_policy"
    body = {"model": "g", "context_window_fallbacks": [{"big": ["g2", {"model": "g3", "retry_policy": CLIENTS}]}]}
    assert prompt_parameter(body) == "context_window_fallbacks[0].big[1].retry_policy"
    body = {"model": "g", "fallbacks": [{"model": "g2", "content_policy_fallbacks": [
        {"model": "g3", "litellm_system_prompt": "word " * 100}]}]}
    assert prompt_parameter(body) == "fallbacks[0].content_policy_fallbacks[0].litellm_system_prompt"
    body = {"model": "g", "router_settings_override": {"fallbacks": [{"model": "g2", "retry_policy": CLIENTS}]}}
    assert prompt_parameter(body) == "router_settings_override.fallbacks[0].retry_policy"
    body = {"model": "g", "fallbacks": [{"big": [{"model": "small", "retry_policy": CLIENTS}], "x": 1}]}
    assert prompt_parameter(body) == "fallbacks[0].big[0].retry_policy"  # LiteLLM reads the first key alone
    assert prompt_parameter({"model": "g", "fallbacks": [{"model": "g2", "retry_policy": None}]}) == \
        "fallbacks[0].retry_policy"  # merged over the gateway's: takes it away
    assert prompt_parameter({"model": "g", "retry_policy": CLIENTS}) == "retry_policy"
    for nothing in ({}, None, OURS):  # the gateway's own is written over it at the top level
        assert prompt_parameter({"model": "g", "retry_policy": nothing}) is None


def test_an_undecided_attempt_carrying_it_is_forwarded_as_it_is(monkeypatch):
    """An inner call under a call id of its own (LiteLLM 1.108's Gemini adapter) carries the outer request's policy:
    decided afresh, a fitting one is sent as it is, not rewritten."""
    from budget_hook.proxy import hook

    router = type("Router", (), {"default_litellm_params": {}, "model_list": [
        {"model_name": "g", "model_info": {"id": "dep-1"}, "litellm_params": {"model": "openai/x"}}]})()
    monkeypatch.setattr(hook, "_router", lambda: router)
    plugin = make_plugin(4000)
    kwargs = {**attempt_kwargs({"messages": [{"role": "user", "content": "hi"}]}, "g"),
              "litellm_call_id": "inner-own-id", "retry_policy": gateway_parameters()["retry_policy"]}
    kwargs["metadata"] = {**kwargs["metadata"], "model_group": "g"}
    assert asyncio.run(plugin.async_pre_call_deployment_hook(kwargs, "acompletion")) is None
    assert plugin.records.find("inner-own-id").action == "pass"
