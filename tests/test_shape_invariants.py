"""One property harness over every registered request shape: a new shape gets these invariants for free.

``BODIES`` holds, per shape name, a strategy of bodies of that shape (generated ones and the real
material in tests/data), and ``COUNTERS`` the counter its model uses. Every shape in ``SHAPES`` must
have both (``test_every_registered_shape_has_test_bodies``). Then, for each shape of the registry:

* conversation shapes, trimmed at random budgets (5% to 110% of the body's own count): the result fits
  or ``CannotFitError`` is raised; a well-formed body stays well-formed; system/developer messages and
  the latest user message are kept verbatim and surviving messages keep their order (seen through the
  shape's own ``view``); trimming is idempotent; a larger budget never keeps fewer tokens; the input is
  never mutated; the report's ``tokens_after`` is a fresh count of the result;
* inputs shapes (``check_inputs`` through the shape's ``field``): the input is never mutated, every
  per-input count is a fresh ``shape.count``, inputs over the limit are reported exactly, and
  truncation leaves every input within the limit and is idempotent.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES, ConversationShape, InputsShape
from budget_hook.shapes.inputs import check_inputs
from budget_hook.trimming import TrimPolicy, content_hash
from budget_hook.trimming.report import NOTICE_MARKER
from budget_hook.trimming.structure import PROTECTED_ROLES, latest_turn_start

from .conftest import CONVERSATIONS, conversation_request, load_json
from .test_anthropic_trim import CASSETTES as ANTHROPIC_CASSETTES
from .test_anthropic_trim import REAL as ANTHROPIC_REAL
from .test_responses_format import to_responses
from .test_trimming import PNG_URL, WORDS, conversations, text

GPT = TokenCounter.for_model("gpt-4o")
CLAUDE = TokenCounter.for_model("claude-sonnet-4-5")
EMBEDDING = TokenCounter.for_model("text-embedding-3-small")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
RESERVE = 100
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                                        HealthCheck.large_base_example]}

# --- bodies, per shape ----------------------------------------------------------------------------------

REAL_CHAT = [conversation_request(path) for path in CONVERSATIONS] + [
    case["request"] for case in load_json("peer_cases/pydantic_ai_cassette_api_usage.json") if case["api"] == "openai_chat"]
#: as tests/test_responses_format.py: without the 445k-token miniswe_gemini3_01 observation
REAL_RESPONSES = [to_responses(conversation_request(path)) for path in CONVERSATIONS if "gemini3_01" not in path.stem]


TOOL_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
IMAGE_BLOCK = {"type": "image", "source": {"type": "url", "url": PNG_URL}}
BREAKPOINT = {"type": "ephemeral"}


@st.composite
def anthropic_tool_result(draw, tool_use_id: str) -> dict:
    result: dict = {"type": "tool_result", "tool_use_id": tool_use_id}
    output = draw(text)
    kind = draw(st.integers(0, 7))
    if kind == 0:
        result.update(is_error=True, content="Traceback: " + output)
    elif kind == 1:
        result["content"] = [{"type": "text", "text": output}]
    elif kind == 2:  # a screenshot returned by the tool
        result["content"] = [{"type": "text", "text": output}, IMAGE_BLOCK]
    elif kind == 3:  # a prompt-cache breakpoint inside the result
        result["content"] = [{"type": "text", "text": output, "cache_control": BREAKPOINT}]
    else:
        result["content"] = output
    return result


@st.composite
def anthropic_bodies(draw):
    """Agent loops in Anthropic's format: tool_use/tool_result pairs, parallel calls, signed thinking, error
    results, text sent along with tool results, images, documents, server tools, string or block content,
    cache breakpoints, an assistant prefill."""
    body: dict = {"model": "claude-sonnet-4-5", "max_tokens": draw(st.sampled_from([256, 1024, 4096]))}
    system = draw(st.one_of(st.none(), text, st.lists(text.map(lambda t: {"type": "text", "text": t}), min_size=1,
                                                        max_size=2)))
    if isinstance(system, list) and draw(st.booleans()):
        system[-1]["cache_control"] = BREAKPOINT
    if system:
        body["system"] = system
    if draw(st.booleans()):
        body["tools"] = [{"name": "read_file", "description": "Read a file", "input_schema": TOOL_SCHEMA}]
    if draw(st.integers(0, 4)) == 0:
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    messages: list[dict] = []
    call_number = 0
    turns = draw(st.integers(1, 6))
    for turn in range(turns):
        prompt = draw(text)
        shape = draw(st.integers(0, 5))
        if shape <= 2:
            user: dict = {"role": "user", "content": prompt}
        else:
            blocks: list = [{"type": "text", "text": prompt}]
            if shape == 4:
                blocks.append(IMAGE_BLOCK)
            elif shape == 5:
                blocks.insert(0, {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                                  "data": draw(text)}, "title": "notes.txt"})
            user = {"role": "user", "content": blocks}
        messages.append(user)
        for _ in range(draw(st.integers(0, 3))):
            assistant: list = []
            thinking = draw(st.integers(0, 7))
            if thinking <= 1:
                assistant.append({"type": "thinking", "thinking": draw(text), "signature": "sig" * 30})
            elif thinking == 2:
                assistant.append({"type": "redacted_thinking", "data": "EmwK" + "r" * 200})
            elif thinking == 3:  # a server tool ran inside the assistant's turn
                assistant.append({"type": "server_tool_use", "id": f"srvtoolu_{call_number}", "name": "web_search",
                                  "input": {"query": "budget"}})
                assistant.append({"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{call_number}",
                                  "content": [{"type": "web_search_result", "title": "t", "url": PNG_URL,
                                               "encrypted_content": "e" * 300}]})
            if draw(st.booleans()):
                assistant.append({"type": "text", "text": draw(text)})
            ids = []
            for _ in range(draw(st.integers(1, 2))):
                call_number += 1
                ids.append(f"toolu_{call_number}")
                assistant.append({"type": "tool_use", "id": ids[-1], "name": "read_file",
                                  "input": {"path": f"f{call_number}.py"}})
            messages.append({"role": "assistant", "content": assistant})
            results = [draw(anthropic_tool_result(tool_use_id)) for tool_use_id in ids]
            extra = draw(st.integers(0, 5))
            if extra == 0:  # text sent along with the results (a reminder, a follow-up)
                results.append({"type": "text", "text": "<system-reminder>also check the logs</system-reminder>"})
            elif extra == 1:
                results.insert(0, {"type": "text", "text": draw(text)})
            messages.append({"role": "user", "content": results})
        if turn < turns - 1 or draw(st.booleans()):  # roles alternate: a turn ends with the assistant's answer
            answer = draw(text)
            messages.append({"role": "assistant", "content": answer if draw(st.booleans())
                             else [{"type": "text", "text": answer}]})
    if draw(st.integers(0, 3)) == 0:  # a prompt-cache breakpoint somewhere in the conversation
        index = draw(st.integers(0, len(messages) - 1))
        content = messages[index]["content"]
        if isinstance(content, list):
            block = draw(st.integers(0, len(content) - 1))
            content[block] = {**content[block], "cache_control": BREAKPOINT}
    body["messages"] = messages
    return body


@st.composite
def responses_bodies(draw):
    """Generated chat conversations as Responses items, with reasoning and built-in tool items sprinkled in,
    some function calls as built-in tools' calls and outputs (``custom_tool_call``, ``local_shell_call``) or as
    hosted MCP approvals (``mcp_approval_request`` answered by ``mcp_approval_response``),
    short-hand messages (no ``type``, string content) and tool outputs given as content parts."""
    body = to_responses(draw(conversations()))
    items = []
    builtin: dict[str, str] = {}  # call id -> the built-in tool it became (its output follows suit)
    for item in body["input"]:
        if item.get("type") == "function_call" and draw(st.integers(0, 2)) == 0:
            kind = draw(st.sampled_from(["custom_tool_call", "local_shell_call", "mcp_approval_request"]))
            builtin[item["call_id"]] = kind
            if kind == "mcp_approval_request":  # a hosted MCP tool's, answered by an mcp_approval_response
                item = {"type": kind, "id": item["call_id"], "server_label": "docs", "name": item["name"],
                        "arguments": item["arguments"]}
            else:
                item = {"type": kind, "call_id": item["call_id"], "status": "completed",
                        **({"name": item["name"], "input": item["arguments"]} if kind == "custom_tool_call" else
                           {"id": f"lsc_{len(items)}",
                            "action": {"type": "exec", "command": ["sh", "-c", item["arguments"]]}})}
        elif item.get("type") == "function_call_output" and item["call_id"] in builtin:
            output = item["output"]
            if builtin[item["call_id"]] == "mcp_approval_request":
                item = {"type": "mcp_approval_response", "approval_request_id": item["call_id"],
                        "approve": bool(len(output) % 2)}
            else:
                item = {"type": f"{builtin[item['call_id']]}_output", "call_id": item["call_id"],
                        "output": output if isinstance(output, str) else json.dumps(output)}
        if item.get("type") == "function_call" or item.get("role") == "assistant":
            choice = draw(st.integers(0, 5))
            if choice == 0:
                items.append({"type": "reasoning", "id": f"rs_{len(items)}", "summary": [],
                              "encrypted_content": "gAAAA" + "x" * draw(st.integers(10, 3000))})
            elif choice == 1:
                items.append({"type": "reasoning", "id": f"rs_{len(items)}",
                              "summary": [{"type": "summary_text", "text": draw(text)}]})
            elif choice == 2:
                items.append({"type": "web_search_call", "id": f"ws_{len(items)}", "status": "completed",
                              "action": {"type": "search", "query": draw(text)[:200]}})
        if item.get("type") == "message" and draw(st.integers(0, 3)) == 0:
            item = {"role": item["role"], "content": "".join(p.get("text", "") for p in item["content"]) or "image"}
        elif item.get("type") == "function_call_output" and draw(st.integers(0, 4)) == 0:
            parts = [{"type": "input_text", "text": item["output"]}]
            if draw(st.booleans()):
                parts.append({"type": "input_image", "image_url": PNG_URL, "detail": "high"})
            item = {**item, "output": parts}
        items.append(item)
    body["input"] = items
    if draw(st.integers(0, 4)) == 0:
        body["previous_response_id"] = "resp_123"
    if draw(st.integers(0, 9)) == 0:
        body["input"] = draw(text)  # a plain string: one user message
    return body


def to_gemini(body: dict, signatures: bool = False) -> dict:
    """A chat request as Gemini's generateContent body: contents with parts, functionCall/functionResponse."""
    contents: list[dict] = []
    names: dict[str, str] = {}
    system = []

    def parts_of(content) -> list[dict]:
        if isinstance(content, str):
            return [{"text": content}] if content else []
        parts = []
        for part in content or []:
            if part.get("type") == "text":
                parts.append({"text": part["text"]})
            elif part.get("type") == "image_url":
                url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
                mime, _, data = url.removeprefix("data:").partition(";base64,")
                parts.append({"inlineData": {"mimeType": mime or "image/png", "data": data}})
        return parts

    for message in body["messages"]:
        role = message["role"]
        if role in ("system", "developer"):
            system += parts_of(message.get("content"))
            continue
        if role == "tool":
            answer = {"functionResponse": {"name": names.get(message.get("tool_call_id"), "tool"),
                                           "response": {"content": message.get("content")}}}
            if contents and contents[-1]["role"] == "user" and "functionResponse" in contents[-1]["parts"][-1]:
                contents[-1]["parts"].append(answer)
            else:
                contents.append({"role": "user", "parts": [answer]})
            continue
        parts = parts_of(message.get("content"))
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
            try:
                args = json.loads(call["function"]["arguments"])
            except (ValueError, TypeError):
                args = {"raw": call["function"]["arguments"]}
            part = {"functionCall": {"name": call["function"]["name"], "args": args}}
            if signatures:
                part["thoughtSignature"] = "CtQBAdHtim" * 20
            parts.append(part)
        contents.append({"role": "model" if role == "assistant" else "user", "parts": parts or [{"text": "."}]})
    out: dict = {"model": "gemini-2.5-pro", "contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    if body.get("tools"):
        out["tools"] = [{"functionDeclarations": [t["function"] for t in body["tools"] if "function" in t]}]
    return out


@st.composite
def gemini_bodies(draw):
    body = to_gemini(draw(conversations()), signatures=draw(st.booleans()))
    if draw(st.integers(0, 3)) == 0:
        body["generationConfig"] = {"maxOutputTokens": draw(st.integers(1, 2000))}
    return body


REAL_GEMINI = [to_gemini(conversation_request(path)) for path in CONVERSATIONS if "gemini3_01" not in path.stem]


#: the trimmer's knobs, varied (a knob must not break an invariant)
trim_policies = st.builds(
    TrimPolicy,
    target_ratio=st.sampled_from([0.5, 0.9, 1.0]),
    compact_tool_results=st.booleans(),
    tool_result_keep_chars=st.sampled_from([0, 100, 500]),
    tool_result_min_chars=st.sampled_from([0, 200, 1000]),
    keep_recent_tool_results=st.integers(0, 4),
    drop_old_turns=st.booleans(),
    pin_first_user_message=st.booleans(),
    shorten_assistant_messages=st.booleans(),
    assistant_keep_chars=st.sampled_from([0, 100, 1000]),
    assistant_min_chars=st.sampled_from([0, 300, 2000]),
    edit_latest_turn_history=st.booleans(),
    drop_old_images=st.booleans(),
    keep_opening_context=st.booleans(),
    soften_tool_results=st.booleans(),
    drop_latest_turn_steps=st.booleans(),
    cache_step_ratio=st.sampled_from([0, 0.1, 0.25, 0.5]),
    notify_model=st.booleans(),
)


words = st.builds(lambda w, n: " ".join(w) * n, st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
                  st.integers(1, 60))
one_string = st.one_of(words, st.text(max_size=300))
token_ids = st.lists(st.integers(0, 100_000), min_size=1, max_size=300)
#: every value the OpenAI API accepts for a prompt / an embedding input
input_values = st.one_of(one_string, st.lists(one_string, min_size=1, max_size=5), token_ids,
                         st.lists(token_ids, min_size=1, max_size=4))

#: per shape name: bodies of that shape. A new shape needs an entry (and a counter) here.
BODIES: dict[str, st.SearchStrategy[dict]] = {
    "chat": st.one_of(conversations(), st.sampled_from(REAL_CHAT)),
    "anthropic": st.one_of(anthropic_bodies(), st.sampled_from(ANTHROPIC_REAL + ANTHROPIC_CASSETTES)),
    "responses": st.one_of(responses_bodies(), st.sampled_from(REAL_RESPONSES)),
    "gemini": st.one_of(gemini_bodies(), st.sampled_from(REAL_GEMINI)),
    "completions": st.builds(lambda v: {"model": "gpt-3.5-turbo-instruct", "prompt": v, "max_tokens": 16},
                             input_values),
    "embeddings": st.builds(lambda v: {"model": "text-embedding-3-small", "input": v}, input_values),
}
COUNTERS: dict[str, TokenCounter] = {"chat": GPT, "anthropic": CLAUDE, "responses": GPT, "completions": GPT,
                                     "embeddings": EMBEDDING, "gemini": TokenCounter.for_model("gemini-2.5-pro")}

CONVERSATION_SHAPES = [shape for shape in SHAPES.shapes if isinstance(shape, ConversationShape)]
INPUTS_SHAPES = [shape for shape in SHAPES.shapes if isinstance(shape, InputsShape)]


def shape_id(shape) -> str:
    return shape.name


def test_every_registered_shape_has_test_bodies():
    names = {shape.name for shape in SHAPES.shapes}
    assert not names - set(BODIES), f"add body strategies for the new shape(s) {sorted(names - set(BODIES))}"
    assert not names - set(COUNTERS), f"add a counter for the new shape(s) {sorted(names - set(COUNTERS))}"
    assert not set(BODIES) - names, f"bodies for shapes no longer registered: {sorted(set(BODIES) - names)}"
    # a shape of a new kind would escape both harnesses below
    assert len(CONVERSATION_SHAPES) + len(INPUTS_SHAPES) == len(SHAPES.shapes)


def draw_body(data, shape) -> dict:
    if shape.name not in BODIES:
        pytest.fail(f"no test bodies for shape {shape.name!r}: add them to BODIES")
    return data.draw(BODIES[shape.name], label=f"{shape.name} body")


# --- conversation shapes -----------------------------------------------------------------------------------


def budget_of(tokens: int):
    """A budget of exactly ``tokens`` input tokens (at least 1)."""
    return compute_budget(max(1, tokens) + RESERVE, requested_output_tokens=RESERVE, policy=NO_MARGIN)


def protected_view(shape: ConversationShape, body) -> tuple[list, object]:
    """The view messages the trimmer must keep verbatim: system/developer ones and the latest user message."""
    # the notice, when it stands alone (chat, Responses), is no message of the client's
    messages = [m for m in shape.view(body).request["messages"] if m.get("role") != "user" or without_notice(m)]
    system = [m for m in messages if m.get("role") in PROTECTED_ROLES]
    start = latest_turn_start(messages)
    latest_user = messages[start] if messages and messages[start].get("role") == "user" else None
    return system, latest_user


def without_notice(message) -> list:
    """A view message's content as parts, without the gateway's notice (which may be merged into it)."""
    if message is None:
        return []
    content = message.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    return [p for p in parts if not (isinstance(p, dict) and str(p.get("text", "")).startswith(NOTICE_MARKER))]


def is_subsequence(short: list, long: list) -> bool:
    remaining = iter(long)
    return all(any(item == other for other in remaining) for item in short)


def check_trim(shape: ConversationShape, body, budget, policy: TrimPolicy):
    """Trim ``body`` and assert every invariant; returns the result, or None when it cannot fit."""
    counter = COUNTERS[shape.name]
    snapshot = copy.deepcopy(body)
    tokens_before = shape.count(body, counter)
    assert body == snapshot, "counting mutated the input"
    try:
        result = shape.trim(body, counter=counter, budget=budget, policy=policy)
    except CannotFitError as exc:
        assert body == snapshot, "the input was mutated (on refusal)"
        assert exc.facts["tokens_after_trimming"] > budget.budget
        assert tokens_before > budget.budget
        return None
    assert body == snapshot, "the input was mutated"
    new, report = result.request, result.report
    # (1) fits, and (8) the reported figure is a fresh count of what will be sent
    fresh = shape.count(new, counter)
    assert report.tokens_after == fresh <= budget.budget
    assert report.tokens_before == tokens_before
    assert report.changed == (tokens_before > budget.budget)
    if not report.changed:
        assert new is body and report.actions == ()
        return result
    # (2) a well-formed body stays well-formed
    if shape.problems(body) == []:
        assert shape.problems(new) == []
    # (3) system/developer messages (instructions, system) and the latest user message, verbatim
    system_before, latest_before = protected_view(shape, body)
    system_after, latest_after = protected_view(shape, new)
    assert system_after == system_before
    if latest_before is not None:
        # verbatim; where roles must alternate, possibly merged after what was kept before it (user text, or
        # function responses, whose view message it then ends)
        wanted = without_notice(latest_before)
        assert any(without_notice(m)[len(without_notice(m)) - len(wanted):] == wanted
                   for m in [latest_after, *shape.view(new).request["messages"]] if m is not None)
    # (4) surviving view messages keep their relative order
    hashes_before = [content_hash(m) for m in shape.view(body).request["messages"]]
    known = set(hashes_before)
    survivors = [h for h in (content_hash(m) for m in shape.view(new).request["messages"]) if h in known]
    assert is_subsequence(survivors, hashes_before)
    # (5) idempotent
    again = shape.trim(new, counter=counter, budget=budget, policy=policy)
    assert not again.report.changed and again.request is new
    assert body == snapshot
    return result


@pytest.mark.parametrize("shape", CONVERSATION_SHAPES, ids=shape_id)
@settings(max_examples=400, **SETTINGS)
@given(data=st.data(), fraction=st.floats(0.05, 1.1), policy=trim_policies)
def test_trimming_invariants(shape, data, fraction, policy):
    body = draw_body(data, shape)
    total = shape.count(body, COUNTERS[shape.name])
    check_trim(shape, body, budget_of(int(total * fraction)), policy)


@pytest.mark.parametrize("shape", CONVERSATION_SHAPES, ids=shape_id)
@settings(max_examples=250, **SETTINGS)
@given(data=st.data(), first=st.floats(0.05, 1.1), second=st.floats(0.05, 1.1), policy=trim_policies)
def test_a_larger_budget_never_keeps_fewer_tokens(shape, data, first, second, policy):
    """(6): tokens kept grow with the budget; a budget that fits makes every larger one fit too."""
    body = draw_body(data, shape)
    counter = COUNTERS[shape.name]
    total = shape.count(body, counter)
    small, large = sorted((max(1, int(total * first)), max(1, int(total * second))))
    policy = dataclasses.replace(policy, cache_step_ratio=0)  # cache steps grow with the budget
    try:
        kept_small = shape.trim(body, counter=counter, budget=budget_of(small), policy=policy).report.tokens_after
    except CannotFitError:
        return
    try:
        kept_large = shape.trim(body, counter=counter, budget=budget_of(large), policy=policy).report.tokens_after
    except CannotFitError:
        pytest.fail(f"a budget of {large} tokens is refused although {small} fits")
    assert kept_large >= kept_small


# --- inputs shapes -----------------------------------------------------------------------------------------


def split_inputs(value) -> tuple[list, bool]:
    """The individual inputs as the OpenAI API reads them, and whether the value is a single one."""
    if isinstance(value, str) or (value and all(isinstance(v, int) for v in value)):
        return [value], True
    return list(value), False


@pytest.mark.parametrize("shape", INPUTS_SHAPES, ids=shape_id)
@settings(max_examples=500, **SETTINGS)
@given(data=st.data(), fraction=st.floats(0.05, 1.1))
def test_inputs_invariants(shape, data, fraction):
    body = draw_body(data, shape)
    counter = COUNTERS[shape.name]
    snapshot = copy.deepcopy(body)
    value = body[shape.field]
    items, single = split_inputs(value)
    fresh = [shape.count({shape.field: item}, counter) for item in items]
    limit = max(1, int(max(fresh) * fraction))

    plain = check_inputs(value, field=shape.field, counter=counter, limit=limit)
    assert body == snapshot, "the input was mutated"
    # per-input counts are fresh counts, and add up to the shape's count of the body
    assert list(plain.tokens) == fresh and plain.total == shape.count(body, counter)
    assert plain.value is value and plain.truncated == () and plain.field == shape.field
    # exactly the inputs over the limit are reported, with their size and excess
    expected = [(None if single else i, t, t - limit) for i, t in enumerate(fresh) if t > limit]
    assert [(o.index, o.tokens, o.over_by) for o in plain.over] == expected

    cut = check_inputs(value, field=shape.field, counter=counter, limit=limit, truncate=True)
    assert body == snapshot, "truncation mutated the input"
    assert cut.over == plain.over
    if not plain.over:
        assert cut.value is value and cut.truncated == ()
    else:
        cut_items, cut_single = split_inputs(cut.value)
        assert cut_single == single and len(cut_items) == len(items)
        assert set(cut.truncated) == {i for i, t in enumerate(fresh) if t > limit}
        cut_fresh = [shape.count({shape.field: item}, counter) for item in cut_items]
        assert list(cut.tokens) == cut_fresh and all(t <= limit for t in cut_fresh)
        for index, (old, new) in enumerate(zip(items, cut_items)):
            if index not in cut.truncated:
                assert new is old
        json.dumps(cut.value)  # still something to forward
    # idempotent: what was truncated is within the limit, so nothing more happens
    again = check_inputs(cut.value, field=shape.field, counter=counter, limit=limit, truncate=True)
    assert again.over == () and again.truncated == () and again.value is cut.value
    assert again.tokens == cut.tokens
