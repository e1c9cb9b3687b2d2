"""Native /v1/responses counting and trimming: items in, items out, same invariants."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError, MalformedRequestError
from budget_hook.shapes.responses import (
    SERVER_HISTORY_NOTE,
    build_view,
    count_responses,
    responses_pairing_problems,
    trim_responses,
)
from budget_hook.trimming import COMPACTED_MARKER, TrimPolicy

from .conftest import CONVERSATIONS, conversation_request

GPT = TokenCounter.for_model("gpt-4o")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)


def to_responses(chat: dict) -> dict:
    """A chat conversation from tests/data as the Responses API input items a client would send."""
    items, instructions = [], None
    for message in chat["messages"]:
        role, content = message["role"], message.get("content")
        role = "user" if role == "function" else role  # legacy function results: no call id to answer
        if role == "system" and instructions is None and not items:
            instructions = content if isinstance(content, str) else json.dumps(content)
            continue
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": content if isinstance(content, str) else json.dumps(content)})
            continue
        if content:
            kind = "output_text" if role == "assistant" else "input_text"
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            converted = []
            for part in parts:
                if part.get("type") == "image_url":
                    image = part["image_url"]
                    url = image if isinstance(image, str) else image.get("url")
                    converted.append({"type": "input_image", "image_url": url, "detail": "auto"})
                elif "text" in part:
                    converted.append({"type": kind, "text": part["text"]})
            items.append({"type": "message", "role": role, "content": converted})
        for call in message.get("tool_calls") or []:
            items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"]})
    body = {"model": "gpt-4o", "input": items, "max_output_tokens": 1000}
    if instructions:
        body["instructions"] = instructions
    if chat.get("tools"):
        body["tools"] = [{"type": "function", **t["function"]} for t in chat["tools"]]
    return body


REAL = [to_responses(conversation_request(path)) for path in CONVERSATIONS if "gemini3_01" not in path.stem]


def budget_for(body, fraction):
    total = count_responses(body, GPT)
    return compute_budget(max(2, int(total * fraction)) + 1000, requested_output_tokens=1000, policy=NO_MARGIN)


def check(body, budget, policy=TrimPolicy()):
    snapshot = copy.deepcopy(body)
    try:
        result = trim_responses(body, counter=GPT, budget=budget, policy=policy)
    except CannotFitError:
        assert body == snapshot
        return None
    assert body == snapshot
    if not result.report.changed:
        assert result.request is body
        return result
    new = result.request
    assert result.report.tokens_after == count_responses(new, GPT) <= budget.budget
    if not responses_pairing_problems(body["input"]):
        assert responses_pairing_problems(new["input"]) == []
    assert {k: v for k, v in new.items() if k != "input"} == {k: v for k, v in body.items() if k != "input"}
    users = [i for i, item in enumerate(body["input"]) if item.get("role") == "user"]
    if users:
        assert body["input"][users[-1]] in new["input"]
    # reasoning items are never edited: each one survives identical or leaves with its turn
    original_reasoning = [item for item in body["input"] if item.get("type") == "reasoning"]
    kept_reasoning = [item for item in new["input"] if item.get("type") == "reasoning"]
    for item in kept_reasoning:
        assert item in original_reasoning, f"reasoning item {item.get('id')!r} was edited"
    for item in original_reasoning:
        if item.get("id") is not None:
            assert all(kept == item for kept in kept_reasoning if kept.get("id") == item["id"])
    assert len(kept_reasoning) <= len(original_reasoning)
    for action in result.report.actions:
        item = body["input"][action.index]
        assert action.role == (item.get("role") or item.get("type"))
    return result


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(REAL), st.floats(0.05, 1.1))
def test_invariants_on_real_conversations_as_responses_items(body, fraction):
    check(body, budget_for(body, fraction))


def test_counts_match_the_chat_form_closely():
    """The same conversation counts alike in both forms; their tools are billed apart (the Responses API
    bills declared tools closer to the cookbook's rendering: providers.openai.RESPONSES_TOOLS_*)."""
    for path in CONVERSATIONS[:10]:
        chat = {k: v for k, v in conversation_request(path).items() if k != "tools"}
        assert abs(count_responses(to_responses(chat), GPT) - GPT.count_request(chat).total) <= 0.05 * GPT.count_request(chat).total + 40


def test_function_call_output_is_compacted_in_place():
    chat = conversation_request(next(p for p in CONVERSATIONS if p.stem == "sweagent_03"))
    body = to_responses(chat)
    result = check(body, budget_for(body, 0.8))
    compacted = [a for a in result.report.actions if a.action == "compacted"]
    assert compacted
    item = next(i for i in result.request["input"] if i.get("call_id") == compacted[0].tool_call_id
                and i["type"] == "function_call_output")
    assert COMPACTED_MARKER in item["output"]


def test_reasoning_items_are_never_edited_and_travel_with_their_turn():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA" + "x" * 8000}
    body = {"model": "o4-mini", "max_output_tokens": 500, "input": [
        {"role": "user", "content": "first question " * 300},
        reasoning,
        {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "result " * 50},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
        {"role": "user", "content": "second question"},
    ]}
    result = check(body, budget_for(body, 0.3), TrimPolicy(keep_opening_context=False))
    assert len(result.report.dropped_turns) == 1
    assert all(item.get("type") != "reasoning" for item in result.request["input"])
    assert responses_pairing_problems(result.request["input"]) == []


def test_string_input_and_server_side_history_are_noted():
    body = {"model": "gpt-4o", "input": "hello", "previous_response_id": "resp_123"}
    result = trim_responses(body, counter=GPT, budget=compute_budget(128_000))
    assert result.request is body and result.report.notes == (SERVER_HISTORY_NOTE,)
    assert count_responses(body, GPT) == GPT.count_request({"messages": [{"role": "user", "content": "hello"}]}).total


def test_old_images_become_text_when_asked():
    image = {"type": "input_image", "image_url": "https://example.com/screenshot.png", "detail": "high"}
    body = {"model": "gpt-4o", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "look"}, image]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I see a login form."}]},
        {"role": "user", "content": "and now?"}]}
    budget = budget_for(body, 0.5)
    result = check(body, budget, TrimPolicy(drop_old_images=True, drop_old_turns=False, keep_opening_context=False))
    assert [a.action for a in result.report.actions] == ["images_removed"]
    assert "input_image" not in json.dumps(result.request)


def test_malformed_items_name_the_field():
    import pytest
    with pytest.raises(MalformedRequestError, match=r"input\[0\]\.role"):
        build_view({"input": [{"type": "message", "role": "robot", "content": "x"}]})
    with pytest.raises(MalformedRequestError, match="input"):
        build_view({"input": 42})


def test_images_in_function_call_outputs_are_removed_when_asked():
    image = {"type": "input_image", "image_url": "https://example.com/shot.png", "detail": "high"}
    body = {"model": "gpt-4o", "input": [
        {"role": "user", "content": "take a screenshot"},
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "done"}, image]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I see it."}]},
        {"role": "user", "content": "and now?"}]}
    result = check(body, budget_for(body, 0.5), TrimPolicy(drop_old_images=True, drop_old_turns=False,
                                                            compact_tool_results=False))
    assert result is not None and "input_image" not in json.dumps(result.request["input"])


def test_a_reasoning_summary_of_the_wrong_type_names_the_field():
    import pytest
    with pytest.raises(MalformedRequestError, match=r"input\[1\]\.summary"):
        build_view({"input": [{"role": "user", "content": "x"}, {"type": "reasoning", "summary": 5}]})


def test_an_mcp_approval_request_leaves_with_its_response():
    """A hosted MCP tool's ``mcp_approval_request`` and the client's ``mcp_approval_response`` pair like a call
    and its output: a step never keeps the answer without the request it answers (the response names an id
    the request carries), and an answer whose request is on the server (``previous_response_id``) stays."""
    items: list[dict] = [{"role": "user", "content": "Triage the open issues."}]
    for step in range(12):
        items += [
            {"type": "mcp_approval_request", "id": f"mcpr_{step}", "server_label": "github",
             "name": "list_issues", "arguments": json.dumps({"page": step})},
            {"type": "function_call", "call_id": f"call_{step}", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"call_{step}", "output": f"issue {step} " * 300},
            {"type": "mcp_approval_response", "approval_request_id": f"mcpr_{step}", "approve": True},
        ]
    items.append({"role": "user", "content": "Which ones are urgent?"})
    body = {"model": "gpt-4o", "max_output_tokens": 500, "input": items}
    assert responses_pairing_problems(items) == []
    result = check(body, budget_for(body, 0.5))
    kept = result.request["input"]
    assert result.report.changed and len(kept) < len(items)
    requests = {i["id"] for i in kept if i.get("type") == "mcp_approval_request"}
    answers = {i["approval_request_id"] for i in kept if i.get("type") == "mcp_approval_response"}
    assert requests == answers and requests
    assert responses_pairing_problems(kept) == []
    # the problems named: an answer without its request; an unanswered request is no problem
    assert responses_pairing_problems(items[4:]) == ["input[0]: mcp_approval_response for mcpr_0 has no call"]
    assert responses_pairing_problems(items[:2] + items[-1:]) == []
    # a continuation: the answer to a request the server holds is never dropped
    continued = {**body, "input": [items[4], *items[5:]], "previous_response_id": "resp_1"}
    result = check(continued, budget_for(continued, 0.5))
    assert result.request["input"][0] == items[4]


PDF_PART = {"type": "input_file", "filename": "r.pdf", "file_data": "data:application/pdf;base64," + "JVBERi0xLjQK" * 40}


def test_what_a_built_in_tool_returns_is_priced_as_the_parts_it_is():
    """A ``custom_tool_call_output`` may return images and files, a ``computer_call_output`` a screenshot: priced
    as those parts are in a message (their JSON text was a few hundred tokens for 20 images or a PDF)."""
    images = [{"type": "input_image", "image_url": f"https://img.example/{i}.png"} for i in range(20)]
    as_user = count_responses({"model": "gpt-4o", "input": [{"role": "user", "content": images}]}, GPT)
    custom = {"model": "gpt-4o", "input": [
        {"role": "user", "content": "go"}, {"type": "custom_tool_call", "call_id": "c1", "name": "snap", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": images}]}
    assert count_responses(custom, GPT) >= as_user
    shots = {"model": "gpt-4o", "input": [{"role": "user", "content": "go"}]}
    for i in range(20):
        shots["input"] += [{"type": "computer_call", "call_id": f"k{i}", "action": {"type": "screenshot"}},
                           {"type": "computer_call_output", "call_id": f"k{i}",
                            "output": {"type": "computer_screenshot", "image_url": f"https://img.example/{i}.png"}}]
    assert count_responses(shots, GPT) >= as_user
    pdf = {"model": "gpt-4o", "input": [{"role": "user", "content": [PDF_PART]}]}
    custom["input"][-1] = {**custom["input"][-1], "output": [PDF_PART]}
    assert count_responses(custom, GPT) >= count_responses(pdf, GPT)
    # an item of a type no shape knows that carries parts (LiteLLM's bridge forwards them as a message's)
    note = {"model": "gpt-4o", "input": [{"type": "note", "role": "user", "content": images}, {"role": "user",
                                                                                               "content": "go"}]}
    assert count_responses(note, GPT) >= as_user


def test_an_item_type_that_is_no_string_is_a_400_naming_it_and_a_bare_item_reference_is_read():
    for kind in (["message"], {}, 5):
        with pytest.raises(MalformedRequestError) as caught:
            count_responses({"model": "gpt-4o", "input": [{"type": kind, "role": "user", "content": "hi"}]}, GPT)
        assert caught.value.field == "input[0].type"
    # ``type`` is optional on an item reference: ``{"id": ...}`` alone is one, not a message without a role
    assert count_responses({"model": "gpt-4o", "input": [{"id": "msg_1"}, {"role": "user", "content": "hi"}]}, GPT)


def test_tools_added_mid_history_are_never_cut():
    """Codex's "responses lite" sends its tools as an ``additional_tools`` input item: instructions to the model,
    like a developer message, never dropped with the steps around it."""
    added = {"type": "additional_tools", "role": "developer", "tools": [
        {"type": "function", "name": "exec", "parameters": {"type": "object", "properties": {}}}]}
    items: list[dict] = [{"role": "user", "content": "Fix the build."}]
    for step in range(10):
        items += [{"type": "function_call", "call_id": f"c{step}", "name": "exec", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{step}", "output": f"log {step} " * 400}]
        if step == 2:
            items.append(added)
    items.append({"role": "user", "content": "And now?"})
    body = {"model": "gpt-4o", "max_output_tokens": 500, "input": items}
    result = check(body, budget_for(body, 0.3))
    assert result.report.changed and result.request["input"].count(added) == 1
