"""The streamed ``/v1/responses`` block (Shape.streamed_error: shapes.responses.failed_events): the Responses schema, filled."""

from __future__ import annotations

import json

from budget_hook.proxy.errors import block_model_group
from budget_hook.shapes.responses import failed_events as responses_failed_events


def events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_both_events_name_the_model_group_and_fill_every_response_field():
    created, failed = events(responses_failed_events("call-1", "context_length_exceeded", "too long", model="codex"))
    assert (created["type"], failed["type"]) == ("response.created", "response.failed")
    assert created["response"]["model"] == failed["response"]["model"] == "codex"
    assert set(created["response"]) == set(failed["response"])
    for name in ("id", "object", "created_at", "status", "error", "incomplete_details", "instructions",
                 "max_output_tokens", "model", "output", "parallel_tool_calls", "previous_response_id", "reasoning",
                 "service_tier", "store", "temperature", "text", "tool_choice", "tools", "top_p", "truncation",
                 "usage", "user", "metadata"):
        assert name in created["response"], name
    assert failed["response"]["error"] == {"code": "context_length_exceeded", "message": "too long"}
    assert failed["response"]["status"] == "failed"


def test_the_model_group_comes_from_the_block_facts():
    assert block_model_group({"budget_hook": {"model_group": "codex"}}) == "codex"
    assert block_model_group({"error": "x"}) == ""
    created, _ = events(responses_failed_events(None, "context_length_exceeded", "m"))
    assert created["response"]["model"] == ""  # still a string: the SDK's schema requires one
