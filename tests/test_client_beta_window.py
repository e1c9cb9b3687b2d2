"""A client's own ``anthropic-beta`` header and a deployment whose 1M window needs the one it sends (an attack
review, 2026-12-07, LiteLLM 1.103 and 1.108: a real proxy in ``tests/e2e/test_client_beta_e2e.py``).

LiteLLM forwards the client's header, from the body's ``extra_headers`` or ``headers`` or from the HTTP request,
in place of the deployment's: Claude Code sends ``anthropic-beta`` on every request, so a deployment configured with
``extra_headers: {anthropic-beta: context-1m-2025-08-07}`` serves it 200,000 tokens, not 1M. The plugin held such
requests at 1M (230,005 tokens forwarded, refused by the provider), and learned the provider's 200,000 as the
deployment's window for every tenant. Now the request's own header sets its window, and teaches none.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from budget_hook.budget import ModelLimits
from budget_hook.budget.router_windows import client_header_values, limits_of, with_client_headers
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


def test_a_deployment_that_sends_the_1m_header_has_a_standard_window_for_requests_with_their_own():
    limits = limits_of("claude", [claude(ONE_M)])
    assert (limits.window, limits.beta_window) == (1_000_000, 200_000)
    assert limits_of("claude", [claude(f"{ONE_M},interleaved-thinking-2025-05-14")]).beta_window == 200_000
    # no header: the window is the standard one already, or the operator's own figure (nothing to replace)
    assert limits_of("claude", [claude(None, window=None)]).beta_window is None
    assert limits_of("claude", [claude(None)]).beta_window is None
    # a group with a deployment at 200,000 anyway: the request's header changes nothing
    plain = {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-3-5-sonnet"},
             "model_info": {"id": "p", "max_input_tokens": 200_000}}
    group = limits_of("claude", [claude(ONE_M), plain])
    assert group.window == 200_000 and group.beta_window is None


HELD = ModelLimits(1_000_000, "router", "anthropic/claude-sonnet-4-5", beta_window=200_000)


def test_a_request_to_several_groups_keeps_the_window_a_client_header_leaves_each():
    from budget_hook.budget.router_windows import combine

    gemini = ModelLimits(1_048_576, "router", "gemini/gemini-2.5-pro")
    assert combine("claude,gemini", [HELD, gemini]).beta_window == 200_000
    assert combine("gemini,other", [gemini, ModelLimits(500_000, "router", "gpt-4.1")]).beta_window is None


def test_every_way_a_request_carries_its_own_header_gives_the_standard_window():
    bodies = {
        "extra_headers": {"extra_headers": {"anthropic-beta": "prompt-caching-2024-07-31"}},
        "headers": {"headers": {"Anthropic-Beta": "interleaved-thinking-2025-05-14"}},
        "extra_body": {"extra_body": {"extra_headers": {"anthropic-beta": "x"}}},
        "HTTP, one provider": {"provider_specific_header": {"custom_llm_provider": "anthropic",
                                                            "extra_headers": {"anthropic-beta": "claude-code-20250219"}}},
        "HTTP, several": {"provider_specific_header": [{"extra_headers": {"x": "y"}},
                                                       {"extra_headers": {"anthropic-beta": "y"}}]},
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


def test_nothing_hides_behind_a_long_list_of_headers():
    padded = {f"x-pad-{index}": "1" for index in range(300)} | {"anthropic-beta": ONE_M}
    assert with_client_headers(HELD, {"extra_headers": padded}).window == 200_000  # read as holding one
    fallbacks = [{"model": "claude"}] * 300 + [{"model": "claude", "extra_headers": {"anthropic-beta": "x"}}]
    assert with_client_headers(HELD, {"fallbacks": fallbacks}).window == 200_000
    assert with_client_headers(HELD, {"extra_headers": {f"x-pad-{index}": "1" for index in range(200)}}) is HELD


def test_the_request_s_own_1m_value_keeps_the_window_and_none_changes_nothing():
    kept = with_client_headers(HELD, {"extra_headers": {"anthropic-beta": f"interleaved-thinking-2025-05-14, {ONE_M}"}})
    assert (kept.window, kept.client_beta) == (1_000_000, True)
    assert with_client_headers(HELD, {"messages": [], "extra_headers": {"x-other": "1"}}) is HELD
    plain = ModelLimits(200_000, "router", "anthropic/claude-3-5-sonnet")
    assert with_client_headers(plain, {"extra_headers": {"anthropic-beta": "x"}}) is plain
    assert client_header_values({"headers": "not a mapping", "fallbacks": ["x", None]}, "anthropic-beta") == []


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
