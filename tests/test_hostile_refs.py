"""References the gateway cannot see, and output allowances sent as anything but a plain number.

Every field by which a request pulls in content the request does not carry (a cached context, a stored
prompt, an MCP server's tools, a container's skills or uploads, a stored item, server-held history, a file
or video by id or URL) is ``unreadable_content``: counted at a flat estimate and flagged (``estimate``), or
refused with a 400 naming the field (``block``). Every output-token field is read as the number a server
reads (``"3000"`` is 3,000) or refused with a 400 naming it: never a default instead, never a 500.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.budget import ModelLimits, requested_output_tokens
from budget_hook.budget.compute import MAX_OUTPUT_TOKENS
from budget_hook.counting.media import FILE_REFERENCE_TOKENS
from budget_hook.errors import MalformedRequestError
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy.settings import load_settings
from budget_hook.proxy import BudgetHookHTTPError, BudgetHookPlugin
from budget_hook.shapes import SHAPES

GPT = ModelLimits(200_000, "test", "gpt-4o")
CLAUDE = ModelLimits(200_000, "test", "anthropic/claude-sonnet-4-5")
USER = {"role": "user", "content": "hi"}
GEMINI_USER = {"role": "user", "parts": [{"text": "hi"}]}


def chat(**fields):
    return {"messages": [USER], **fields}


def anthropic(**fields):
    return {"max_tokens": 100, "messages": [USER], **fields}


def responses(**fields):
    return {"input": "hi", **fields}


def gemini(**fields):
    return {"contents": [GEMINI_USER], **fields}


def decided(shape: str, body: dict, **settings):
    limits = CLAUDE if shape == "anthropic" else GPT
    return decide(BudgetRequest(SHAPES.get(shape), body, "g", limits), load_settings(settings))


#: (shape, body, the field a block names): every way each shape pulls in content it does not carry
REFERENCES = [
    ("chat", chat(cached_content="cachedContents/abc123"), "cached_content"),
    ("chat", chat(cachedContent="cachedContents/abc123"), "cachedContent"),
    ("chat", chat(prompt_id="support-bot-v3"), "prompt_id"),
    ("chat", chat(tools=[{"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example"}]), "tools[0]"),
    ("chat", chat(mcp_servers=[{"type": "url", "url": "https://mcp.example", "name": "docs"}]), "mcp_servers[0]"),
    ("chat", chat(extra_body={"cached_content": "cachedContents/abc123"}), "extra_body.cached_content"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}]},
     "messages[0].content[0]"),
    ("chat", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what happens?"}, {"type": "video_url", "video_url": {"url": "gs://b/v.mp4"}}]}]},
     "messages[0].content[1]"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": "https://x/v.mp4"}]}]},
     "messages[0].content[0]"),
    ("responses", responses(prompt={"id": "pmpt_abc", "version": "2"}), "prompt"),
    ("responses", responses(prompt_id="support-bot-v3"), "prompt_id"),
    ("responses", responses(tools=[{"type": "mcp", "server_label": "d", "server_url": "https://mcp.example"}]),
     "tools[0]"),
    ("responses", responses(tools=[{"type": "code_interpreter", "container": {"type": "auto",
                                                                              "file_ids": ["file-1"]}}]), "tools[0]"),
    ("responses", {"input": [{"type": "item_reference", "id": "msg_1"}, USER]}, "input[0]"),
    ("responses", {"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "https://x/a.pdf"}]}]},
     "input[0].content[0]"),
    ("responses", responses(extra_body={"prompt_id": "support-bot-v3"}), "extra_body.prompt_id"),
    # LiteLLM searches its vector stores after the check and adds the results (an attack review found these)
    ("chat", chat(vector_store_ids=["vs_kb"]), "vector_store_ids"),
    ("chat", chat(tools=[{"type": "file_search", "vector_store_ids": ["vs_kb"]}]), "tools[0]"),
    ("responses", responses(vector_store_ids=["vs_kb"]), "vector_store_ids"),
    ("anthropic", anthropic(mcp_servers=[{"type": "url", "url": "https://mcp.example", "name": "docs"}]),
     "mcp_servers[0]"),
    ("anthropic", anthropic(tools=[{"type": "mcp_toolset", "mcp_server_name": "docs"}]), "tools[0]"),
    ("anthropic", anthropic(container={"id": "c1", "skills": [{"type": "anthropic", "skill_id": "pptx"}]}),
     "container.skills[0]"),
    ("anthropic", {"max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "container_upload", "file_id": "file_011"}, {"type": "text", "text": "analyse it"}]}]},
     "messages[0].content[0]"),
    ("anthropic", {"max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "file", "file_id": "file_011"}}]}]}, "messages[0].content[0]"),
    # nested in what a tool returned, or in tools added mid-history (an attack review found these passing)
    ("responses", {"input": [USER, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                             {"type": "function_call_output", "call_id": "c1",
                              "output": [{"type": "input_file", "file_id": "file-abc"}]}]}, "input[2].output[0]"),
    ("responses", {"input": [USER, {"type": "custom_tool_call", "call_id": "c1", "name": "f", "input": "x"},
                             {"type": "custom_tool_call_output", "call_id": "c1",
                              "output": [{"type": "input_file", "file_url": "https://x/a.pdf"}]}]}, "input[2].output[0]"),
    ("responses", {"input": [{"type": "additional_tools", "role": "developer", "tools": [
        {"type": "mcp", "server_label": "d", "server_url": "https://mcp.example"}]}, USER]}, "input[0].tools[0]"),
    ("anthropic", {"max_tokens": 100, "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}]}]}]}, "messages[2].content[0]"),
    ("gemini", {"contents": [GEMINI_USER, {"role": "model", "parts": [{"functionCall": {"name": "fetch", "args": {}}}]},
                             {"role": "user", "parts": [{"functionResponse": {"name": "fetch", "response": {}, "parts": [
                                 {"fileData": {"fileUri": "gs://b/r.pdf", "mimeType": "application/pdf"}}]}}]}]},
     "contents[2].parts[0]"),
    ("gemini", gemini(cachedContent="cachedContents/abc123"), "cachedContent"),
    ("gemini", gemini(cached_content="cachedContents/abc123"), "cached_content"),
    ("gemini", gemini(config={"cachedContent": "cachedContents/abc123"}), "config.cachedContent"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://b/report.pdf",
                                                                      "mimeType": "application/pdf"}}]}]},
     "contents[0].parts[0]"),
]


@pytest.mark.parametrize("shape, body, field", REFERENCES)
def test_every_reference_is_refused_naming_its_field_under_block(shape, body, field):
    blocked = decided(shape, body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.kind == "unreadable", blocked.block
    assert blocked.block.param == field and blocked.block.code == "content_not_countable"
    assert blocked.block.message.startswith(f"{field}: ") and "send the content inline" in blocked.block.message


@pytest.mark.parametrize("shape, body, field", REFERENCES)
def test_every_reference_is_counted_at_the_flat_estimate_and_flagged_by_default(shape, body, field):
    plain = decided(shape, {k: v for k, v in body.items() if k not in (
        "cached_content", "cachedContent", "prompt_id", "prompt", "mcp_servers", "container", "tools", "extra_body",
        "config", "vector_store_ids")})
    estimated = decided(shape, body)
    assert estimated.action == "pass" and any(field in w for w in estimated.warnings), estimated.warnings
    assert estimated.tokens_before >= FILE_REFERENCE_TOKENS
    if field.startswith(("messages", "input", "contents")):
        return  # in the messages: replaces its own part in the count
    assert estimated.tokens_before - plain.tokens_before >= FILE_REFERENCE_TOKENS
    shadow = decided(shape, body, unreadable_content="block", mode="shadow")
    assert shadow.action == "would_block" and shadow.request is body  # shadow forwards untouched


def test_a_reference_costs_room_in_the_budget_and_can_tip_a_request_over():
    body = {"model": "g", "messages": [USER, {"role": "assistant", "content": "ok " * 300},
                                       {"role": "user", "content": "and " * 100}], "cached_content": "c/1"}
    small = ModelLimits(12_000, "test", "gpt-4o")
    fits = decide(BudgetRequest(SHAPES.get("chat"), {k: v for k, v in body.items() if k != "cached_content"}, "g",
                                small), load_settings({}))
    assert fits.action == "pass"
    tipped = decide(BudgetRequest(SHAPES.get("chat"), body, "g", small), load_settings({}))
    assert tipped.action in ("trimmed", "blocked")  # 10,000 of the 10,800-token budget are the cached context
    assert tipped.report is None or tipped.report.protected_tokens["request_overhead"] >= FILE_REFERENCE_TOKENS


@pytest.mark.parametrize("field", ["previous_response_id", "conversation"])
def test_server_held_history_is_noted_by_default_and_refused_under_block(field):
    body = responses(**{field: "resp_abc"})
    noted = decided("responses", body)
    assert noted.action == "pass" and "server_side_history_not_counted" in noted.report.notes
    assert not noted.warnings and noted.tokens_before < 100  # no flat estimate: its size has no useful bound
    blocked = decided("responses", body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.param == field and blocked.block.kind == "unreadable"


def test_inline_content_and_empty_reference_fields_are_no_references():
    for shape, body in [("chat", chat(cached_content=None, prompt_id="", mcp_servers=[])),
                        ("chat", {"messages": [{"role": "user", "content": [
                            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}]}]}),
                        ("responses", responses(prompt=None, tools=[{"type": "function", "name": "f"}])),
                        ("anthropic", anthropic(container="container_abc")),  # a container id holds no prompt
                        ("gemini", gemini(cachedContent=""))]:
        assert decided(shape, body, unreadable_content="block").action == "pass", body


# --- output allowances -----------------------------------------------------------------------------------

#: (shape, call type, a body with the allowance at ``{}``, the field a 400 names)
OUTPUT_FIELDS = [
    ("chat", "acompletion", lambda v: {"model": "g", "messages": [USER], "max_tokens": v}, "max_tokens"),
    ("chat", "acompletion", lambda v: {"model": "g", "messages": [USER], "max_completion_tokens": v},
     "max_completion_tokens"),
    ("chat", "acompletion", lambda v: {"model": "g", "messages": [USER], "extra_body": {"max_tokens": v}},
     "extra_body.max_tokens"),
    ("anthropic", "anthropic_messages", lambda v: {"model": "g", "messages": [USER], "max_tokens": v}, "max_tokens"),
    ("responses", "aresponses", lambda v: {"model": "g", "input": "hi", "max_output_tokens": v}, "max_output_tokens"),
    ("gemini", "agenerate_content", lambda v: {"model": "g", "contents": [GEMINI_USER],
                                               "generationConfig": {"maxOutputTokens": v}},
     "generationConfig.maxOutputTokens"),
    ("gemini", "agenerate_content", lambda v: {"model": "g", "contents": [GEMINI_USER],
                                               "config": {"max_output_tokens": v}}, "config.max_output_tokens"),
    ("completions", "atext_completion", lambda v: {"model": "g", "prompt": "hi", "max_tokens": v}, "max_tokens"),
]


@pytest.mark.parametrize("shape, call_type, body, field", OUTPUT_FIELDS)
@pytest.mark.parametrize("text, number", [("3000", 3000), (" 3000 ", 3000), ("2999.5", 3000), ("3e3", 3000),
                                          ("+12", 12), ("0", 0)])
def test_a_numeric_string_allowance_is_reserved_as_its_number(shape, call_type, body, field, text, number):
    decision = decided(shape, body(text))
    budget = decision.report.budget if decision.report else None
    reserve = budget.output_reserve if budget else decision.input_budget["output_reserve"]
    assert reserve == number and decision.action == "pass"


JSON_NON_FINITE = [json.loads("1e309"), json.loads("-1e309"), json.loads("NaN"), json.loads("Infinity"),
                   json.loads("-Infinity")]


@pytest.mark.parametrize("shape, call_type, body, field", OUTPUT_FIELDS)
@pytest.mark.parametrize("value", [*JSON_NON_FINITE, -1, -0.5, True, False, 10**30, MAX_OUTPUT_TOKENS + 1, 1e300,
                                   "lots", "3000 tokens", "inf", "NaN", "0x10", "1_000", "", "9" * 41, [3000],
                                   {"n": 3000}])
def test_an_allowance_that_is_no_token_count_is_a_400_naming_the_field(shape, call_type, body, field, value):
    """Through the real hook: a 400 with code invalid_request naming the field, never a default, never a 500
    and never the plugin's failure path (the plugin runs fail closed here: that would be a 503)."""
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, "fail_mode": "closed"}))
    plugin.model_limits = lambda group: GPT  # type: ignore[method-assign]
    data = {**body(value), "litellm_call_id": f"bad-{field}-{id(value)}"}
    with pytest.raises(BudgetHookHTTPError) as caught:
        asyncio.run(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, data, call_type))
    error = caught.value
    assert error.status_code == 400 and error.error_code == "invalid_request" and error.param == field
    assert error.message.startswith(f"budget_hook blocked this request (invalid_request): invalid request: {field}: ")
    if isinstance(value, str) and len(value) > 3:
        assert value not in error.message  # described, never quoted


def test_requested_output_tokens_refuses_rather_than_guesses():
    assert requested_output_tokens({"max_tokens": "3000", "max_completion_tokens": 100}) == 3000
    assert requested_output_tokens({"max_output_tokens": 3000.2}) == 3001
    assert requested_output_tokens({"max_tokens": MAX_OUTPUT_TOKENS}) == MAX_OUTPUT_TOKENS
    with pytest.raises(MalformedRequestError) as caught:
        requested_output_tokens({"max_tokens": 10, "extra_body": {"max_completion_tokens": float("nan")}})
    assert caught.value.field == "extra_body.max_completion_tokens" and "not finite" in caught.value.problem
    fields = SHAPES.get("gemini").output_token_fields
    with pytest.raises(MalformedRequestError, match=r"^generationConfig\.max_output_tokens: .*negative"):
        requested_output_tokens({"generationConfig": {"max_output_tokens": -4}}, fields)


def test_a_huge_but_valid_allowance_still_blocks_as_the_output_reserve():
    decision = decided("chat", {"messages": [USER], "max_tokens": "250000"})
    assert decision.action == "blocked" and decision.block.kind == "output_reserve"
    assert decision.block.facts["output_reserve"] == 250_000


@pytest.mark.parametrize("item", [{"id": "msg_0123"}, {"type": None, "id": "msg_0123"}])
def test_an_item_reference_without_its_optional_type_is_a_reference(item):
    """``type`` is optional on a Responses item reference: ``{"id": ...}`` alone names a stored item, estimated
    and flagged like ``{"type": "item_reference", ...}`` (it passed as 19 tokens once it was read as one)."""
    body = {"input": [item, USER]}
    assert decided("responses", body).tokens_before >= FILE_REFERENCE_TOKENS
    blocked = decided("responses", body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.param == "input[0]"
