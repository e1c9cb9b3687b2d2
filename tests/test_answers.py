"""A refusal in its shape's own error format (proxy.answers), and a rebuilt block rendered as ours again."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from litellm.proxy._types import ProxyException

from budget_hook.proxy.answers import error_object, streamed_answer
from budget_hook.proxy.app_hooks import wrap_error_handler
from budget_hook.proxy.errors import ErrorSpec
from budget_hook.proxy.hook import BudgetHookHTTPError
from budget_hook.shapes import SHAPES

from .test_proxy_hook import make_plugin, run_hook

SPEC = ErrorSpec(400, "too long", "invalid_request_error", "context_length_exceeded", "messages",
                 {"model_group": "g"})


def test_each_shape_answers_in_its_own_error_object():
    gemini = error_object(SHAPES.get("gemini"), SPEC)
    assert gemini == {"code": 400, "message": "too long", "status": "INVALID_ARGUMENT",
                      "details": [{"reason": "context_length_exceeded"}]}
    assert BudgetHookHTTPError(SPEC, shape=SHAPES.get("gemini")).to_dict() == gemini
    for name in ("chat", "anthropic", "responses", "completions", "embeddings"):
        assert error_object(SHAPES.get(name), SPEC) is None, name
        assert BudgetHookHTTPError(SPEC, shape=SHAPES.get(name)).to_dict()["code"] == "context_length_exceeded"
    assert error_object(SHAPES.get("gemini"), ErrorSpec(503, "down", "service_unavailable", "x")) is None


def test_only_a_streamed_responses_call_is_answered_with_events():
    responses = SHAPES.get("responses")
    events = streamed_answer(responses, {"stream": True}, "aresponses", SPEC)
    assert events is not None and "response.failed" in events("call-1") and '"model": "g"' in events("call-1")
    assert streamed_answer(responses, {}, "aresponses", SPEC) is None
    assert streamed_answer(SHAPES.get("chat"), {"stream": True}, "acompletion", SPEC) is None


def test_a_block_a_route_rebuilt_is_rendered_as_our_own_error_again():
    plugin = make_plugin()
    data = {"model": "g", "messages": [{"role": "user", "content": "word " * 6000}], "litellm_call_id": "rebuilt"}
    with pytest.raises(BudgetHookHTTPError):
        run_hook(plugin, data)
    rebuilt = ProxyException(message="m", type="invalid_request_error", param="messages", code=400,
                             headers={"x-litellm-call-id": "rebuilt"}, provider_specific_fields={"a": 1})
    restored = plugin._restore_block(rebuilt)
    assert isinstance(restored, BudgetHookHTTPError) and restored.code == "400"
    assert restored.to_dict() == {"message": "m", "type": "invalid_request_error", "param": "messages",
                                  "code": "context_length_exceeded", "provider_specific_fields": {"a": 1}}
    assert restored.headers["x-budget-decision"] == "blocked" and restored.headers["x-litellm-call-id"] == "rebuilt"
    assert not hasattr(rebuilt, "to_dict") or "to_dict" not in vars(rebuilt)  # nothing patched on the original
    other = ProxyException(message="m", type="t", param=None, code=400, headers={"x-litellm-call-id": "unknown"})
    assert plugin._restore_block(other) is None


def test_the_error_handler_renders_the_exception_a_rewrite_returns():
    rendered = []

    async def original(request, exc):
        rendered.append(exc)
        return "response"

    app = SimpleNamespace(middleware_stack=SimpleNamespace(_exception_handlers={ProxyException: original}))
    replacement = ProxyException(message="r", type="t", param=None, code=400)
    assert wrap_error_handler(app, ProxyException, lambda exc: replacement)
    handler = app.middleware_stack._exception_handlers[ProxyException]
    assert asyncio.run(handler(None, ProxyException(message="o", type="t", param=None))) == "response"
    assert rendered == [replacement]


def test_every_shape_s_streamed_error_is_declared_on_the_shape():
    """Only the Responses API reports a streamed failure as events; the format lives in the shape, so a new
    shape with its own streamed failure declares ``streamed_error`` and the adapter does not change."""
    declared = {shape.name for shape in SHAPES.shapes if shape.streamed_error is not None}
    assert declared == {"responses"}
    text = SHAPES.get("responses").streamed_error("c", "context_length_exceeded", "m", "g")
    assert text.startswith("event: response.created\n") and '"code": "context_length_exceeded"' in text
