"""A client's own ``anthropic-beta`` header and a deployment whose 1M window needs the one it sends (an attack
review, 2026-12-07, LiteLLM 1.103 and 1.108: a real proxy in ``tests/e2e/test_client_beta_e2e.py``).

LiteLLM sends what the request carries in place of the deployment's header: the router gives the request's own
``extra_headers`` (any value) in place of the deployment's whole dict, and the proxy hands the HTTP request's
``anthropic-beta`` to Anthropic, Bedrock and Vertex AI; Claude Code sends one on every request, so a deployment
configured with ``extra_headers: {anthropic-beta: context-1m-2025-08-07}`` serves it 200,000 tokens, not 1M (a body's
``headers`` does not: the deployment's ``extra_headers`` are applied over it). The plugin held such
requests at 1M (230,005 tokens forwarded, refused by the provider), and learned the provider's 200,000 as the
deployment's window for every tenant. Now the request's own header sets its window, and teaches none.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace

from budget_hook.budget import ModelLimits
from budget_hook.budget.router_windows import limits_of, with_client_headers
from budget_hook.learning import LearningSettings
from budget_hook.pipeline import decide
from budget_hook.pipeline.record import DecisionRecord
from budget_hook.pipeline.request import BudgetRequest
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.feedback import learn_from_error
from budget_hook.proxy.shared import SharedLearning
from budget_hook.shapes import SHAPES

ONE_M = "context-1m-2025-08-07"


def claude(beta: str | None, *, window: int | None = 1_000_000, ident: str = "d1") -> dict:
    params: dict = {"model": "anthropic/claude-sonnet-4-5"}
    if beta is not None:
        params["extra_headers"] = {"anthropic-beta": beta}
    info: dict = {"id": ident}
    if window is not None:
        info["max_input_tokens"] = window
    return {"model_name": "claude", "litellm_params": params, "model_info": info}


def test_a_deployment_that_sends_the_1m_header_has_a_standard_window_for_requests_that_replace_it():
    limits = limits_of("claude", [claude(ONE_M)])
    assert (limits.window, limits.beta_window, limits.beta_replacers) == (1_000_000, 200_000, ("extra_headers", "http"))
    assert limits_of("claude", [claude(f"{ONE_M},interleaved-thinking-2025-05-14")]).beta_window == 200_000
    azure = claude(ONE_M)
    azure["litellm_params"]["model"] = "azure_ai/claude-sonnet-4-5"  # the proxy hands it no HTTP header
    assert limits_of("claude", [azure]).beta_replacers == ("extra_headers",)
    in_headers = claude(None)
    in_headers["litellm_params"]["headers"] = {"anthropic-beta": ONE_M}
    assert limits_of("claude", [in_headers]).beta_replacers == ("headers", "http")
    # no header: the window is the standard one already, or the operator's own figure (nothing to replace)
    assert limits_of("claude", [claude(None, window=None)]).beta_window is None
    assert limits_of("claude", [claude(None)]).beta_window is None
    # a group with a deployment at 200,000 anyway: the request's header changes nothing
    plain = {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-3-5-sonnet"},
             "model_info": {"id": "p", "max_input_tokens": 200_000}}
    group = limits_of("claude", [claude(ONE_M), plain])
    assert group.window == 200_000 and group.beta_window is None


HELD = ModelLimits(1_000_000, "router", "anthropic/claude-sonnet-4-5", beta_window=200_000,
                   beta_replacers=("extra_headers", "http"))


def test_a_request_to_several_groups_keeps_the_window_a_client_header_leaves_each():
    from budget_hook.budget.router_windows import combine

    gemini = ModelLimits(1_048_576, "router", "gemini/gemini-2.5-pro")
    both = combine("claude,gemini", [HELD, gemini])
    assert (both.beta_window, both.beta_replacers) == (200_000, ("extra_headers", "http"))
    assert combine("gemini,other", [gemini, ModelLimits(500_000, "router", "gpt-4.1")]).beta_window is None


def test_every_way_a_request_replaces_the_deployment_s_header_gives_the_standard_window():
    bodies = {
        "extra_headers, another beta": {"extra_headers": {"anthropic-beta": "prompt-caching-2024-07-31"}},
        "extra_headers, no beta at all (the whole dict replaces the deployment's)": {"extra_headers": {"x-trace": "1"}},
        "extra_headers, empty": {"extra_headers": {}},
        "extra_headers, null": {"extra_headers": None},
        "HTTP, one provider": {"provider_specific_header": {"custom_llm_provider": "anthropic",
                                                            "extra_headers": {"anthropic-beta": "claude-code-20250219"}}},
        "HTTP, several": {"provider_specific_header": [{"extra_headers": {"x": "y"}},
                                                       {"extra_headers": {"Anthropic-Beta": "y"}}]},
        "recorded request headers": {"metadata": {"headers": {"anthropic-beta": "fine-grained-tool-streaming"}}},
        "a fallback's": {"fallbacks": [{"model": "claude", "extra_headers": {"anthropic-beta": "z"}}]},
        "a look-alike of the 1M value": {"extra_headers": {"anthropic-beta": ONE_M + "-fake"}},
        "the 1M value in one place only": {"extra_headers": {"anthropic-beta": ONE_M},
                                           "metadata": {"headers": {"anthropic-beta": "claude-code-20250219"}}},
    }
    for name, body in bodies.items():
        limits = with_client_headers(HELD, body)
        assert (limits.window, limits.client_beta) == (200_000, True), name
        assert "replaces the one its deployment sends" in limits.source


def test_what_leaves_the_deployment_s_header_keeps_its_window():
    for name, body in {
        "a body's headers (the deployment's extra_headers are applied over them)": {
            "headers": {"anthropic-beta": "prompt-caching-2024-07-31"}},
        "extra_body (sent as JSON, not as headers)": {"extra_body": {"extra_headers": {"anthropic-beta": "x"}}},
        "nothing": {"messages": []},
    }.items():
        assert with_client_headers(HELD, body) is HELD, name
    azure = replace(HELD, beta_replacers=("extra_headers",))  # no HTTP header reaches azure_ai
    assert with_client_headers(azure, {"provider_specific_header": {"extra_headers": {"anthropic-beta": "x"}}}) is azure
    in_headers = replace(HELD, beta_replacers=("headers", "http"))
    assert with_client_headers(in_headers, {"extra_headers": {"x-trace": "1"}}) is in_headers
    assert with_client_headers(in_headers, {"extra_headers": {"anthropic-beta": "x"}}).window == 200_000
    assert with_client_headers(in_headers, {"headers": {"x-trace": "1"}}).window == 200_000


def test_nothing_hides_behind_a_long_list_of_headers():
    padded = {f"x-pad-{index}": "1" for index in range(300)} | {"anthropic-beta": ONE_M}
    assert with_client_headers(HELD, {"extra_headers": padded}).window == 200_000  # read as not holding it
    fallbacks = [{"model": "claude"}] * 300 + [{"model": "claude", "extra_headers": {"anthropic-beta": "x"}}]
    assert with_client_headers(HELD, {"fallbacks": fallbacks}).window == 200_000
    padded_http = {"metadata": {"headers": {f"x-pad-{index}": "1" for index in range(300)}}}
    assert with_client_headers(HELD, padded_http).window == 200_000


def test_the_request_s_own_1m_value_keeps_the_window():
    kept = with_client_headers(HELD, {"extra_headers": {"anthropic-beta": f"interleaved-thinking-2025-05-14, {ONE_M}"},
                                      "provider_specific_header": {"extra_headers": {"anthropic-beta": ONE_M}}})
    assert (kept.window, kept.client_beta) == (1_000_000, True)
    plain = ModelLimits(200_000, "router", "anthropic/claude-3-5-sonnet")
    assert with_client_headers(plain, {"extra_headers": {"anthropic-beta": "x"}}) is plain


def test_the_decision_and_its_record_take_the_request_s_window():
    body = {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
            "provider_specific_header": {"extra_headers": {"anthropic-beta": "claude-code-20250219"}}}
    request = BudgetRequest(SHAPES.get("chat"), body, "claude", HELD)
    decision = decide(request, load_settings({}))
    assert decision.limits.window == 200_000 and decision.action == "pass"
    record = DecisionRecord.build(decision, request)
    assert record.window == 200_000 and record.client_beta
    untouched = decide(BudgetRequest(SHAPES.get("chat"), {**body, "provider_specific_header": None}, "claude", HELD),
                       load_settings({}))
    assert untouched.limits.window == 1_000_000 and not DecisionRecord.build(untouched).client_beta


def test_an_overflow_the_request_s_own_header_caused_teaches_no_window():
    learning = SharedLearning(LearningSettings(min_samples=1), redis=lambda: None)
    error = ValueError("prompt is too long: 230004 tokens > 200000 maximum")
    error.status_code = 400  # type: ignore[attr-defined]
    kwargs = {"exception": error, "litellm_params": {"model_info": {"id": "d1"}}}
    record = SimpleNamespace(action="pass", learnable=True, estimate_forwarded=230_000, attempts=(), teacher="key:a",
                             quotes_overflow=False, routed_by_client=False, client_beta=True, metrics_group="claude")
    learned = asyncio.run(learn_from_error(learning, kwargs, record))
    assert "anthropic-beta" in learned["ignored"] and learning.windows.window(["d1"]) is None
    record.client_beta = False
    assert asyncio.run(learn_from_error(learning, kwargs, record))["window"] == 200_000
