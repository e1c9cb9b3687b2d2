"""Count and trim an OpenAI ``/v1/responses`` request in its own format (pure; never mutates input).

Contract: ``count_responses(body, counter)`` counts the request's input tokens;
``trim_responses(body, counter=..., budget=..., policy=...)`` returns a ``TrimResult`` whose ``request`` is
a ``/v1/responses`` body (the same object when it already fits) or raises ``CannotFitError``.

As for ``/v1/messages``, the generic trimmer decides on a chat-shaped *view* with one view message per
``input`` item, and its decisions are applied to the items:

* ``instructions`` and ``system``/``developer`` messages are never touched; a turn starts at a ``user``
  message item, so a ``function_call`` and its ``function_call_output`` (same turn) leave together;
* a ``function_call_output`` whose call is not in ``input`` (it lives on the server, with
  ``previous_response_id``) is never dropped;
* a built-in tool's call and output (``custom_tool_call`` and ``custom_tool_call_output``, ``local_shell_call``,
  ``computer_call``..., paired by ``call_id`` as functions are), and a hosted MCP tool's
  ``mcp_approval_request`` and the ``mcp_approval_response`` answering it, are a tool call and its result in
  the view, so they leave together, and are never edited;
* ``reasoning`` items (possibly ``encrypted_content``) and server-side tool items (``web_search_call``...) are
  never edited: they stay or leave with the step they belong to;
* compacting keeps the ``function_call_output`` item and its ``call_id``; shortening rewrites an
  assistant message's ``output_text``; ``drop_old_images`` turns old ``input_image`` parts into text.

``input`` as a plain string is one user message (nothing to trim). With ``previous_response_id`` or
``conversation`` the server adds history the gateway cannot see: what is present is counted, and the
report's ``notes`` say so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from ..budget import OUTPUT_TOKEN_FIELDS, Budget
from ..counting import TokenCounter, canonical_json
from ..counting.parts import (
    RESPONSES_FUNCTION,
    RESPONSES_VIEW,
    THOUGHT_SIGNATURE,
    image_detail,
    unreadable_as_sent,
)
from ..counting.rendered import carried
from ..counting.tools import beside, with_examples
from ..errors import MalformedRequestError
from ..trimming import IMAGE_PLACEHOLDER, MessageAction, TrimPolicy, TrimResult, content_hash, message_text
from .base import ConversationShape, Placed, View, place_notice, touched_item, unreadable_parts, view_decisions
from .references import responses_item_type, responses_references

SERVER_HISTORY_NOTE = "server_side_history_not_counted"
_ROLES = ("user", "assistant", "system", "developer")



def _part(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, Mapping):
        raise MalformedRequestError(where, f"expected a content part object, got {type(part).__name__}")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal", ""))}
    if kind == "input_image":
        url = part.get("image_url") or (f"file:{part['file_id']}" if part.get("file_id") else "")
        # named as the client sent it, not as the view has it
        return {"type": "image_url", "image_url": {"url": str(url), "detail": image_detail(part.get("detail"), where)}}
    if kind == "input_file":
        file = {k: part[k] for k in ("file_data", "file_id", "filename") if k in part}
        if "file_url" in part and "file_id" not in file:
            file["file_id"] = str(part["file_url"])
        return {"type": "file", "file": file}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio", {})}
    return {"type": "text", "text": canonical_json(part)}


def _builtin_output(item: Mapping[str, Any], where: str) -> str | list[dict[str, Any]]:
    """A built-in tool's output as the model sees it: its text, its content parts (a ``custom_tool_call_output``
    may return images and files) or its screenshot (``computer_call_output``), each priced as such; anything
    else as the item's JSON."""
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _content(output, f"{where}.output")
    if isinstance(output, Mapping) and output.get("type") == "computer_screenshot":
        return _with_rest([_part({**output, "type": "input_image"}, f"{where}.output")], item, "output")
    return canonical_json(item)


def _other_item(item: Mapping[str, Any], where: str) -> str | list[dict[str, Any]]:
    content = item.get("content")
    if not isinstance(content, list) or not content:
        return canonical_json(item)
    try:
        parts = cast("list[dict[str, Any]]", _content(content, f"{where}.content"))  # a list gives a list
    except MalformedRequestError:  # not parts: the item as its JSON
        return canonical_json(item)
    return _with_rest(parts, item, "content")


def _with_rest(parts: list[dict[str, Any]], item: Mapping[str, Any], field: str) -> list[dict[str, Any]]:
    """``parts`` (what ``item[field]`` is), then the rest of the item as its JSON."""
    return [*parts, {"type": "text", "text": canonical_json({k: v for k, v in item.items() if k != field})}]


def _content(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part(part, f"{where}[{i}]") for i, part in enumerate(content)]
    raise MalformedRequestError(where, f"expected a string or a list of content parts, got {type(content).__name__}")


#: a Responses function tool's keys its view function is built from
_BUILT_FROM = frozenset({"name", "description", "parameters", "input_examples"})


def _tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        function = {"name": str(tool.get("name", "")), "parameters": tool.get("parameters") or {}}
        if tool.get("description"):
            function["description"] = str(tool["description"])
        return {**beside(tool, _BUILT_FROM), "type": RESPONSES_FUNCTION, "function": with_examples(function, tool)}
    # Built-in tools (web_search, file_search, mcp, computer_use...): the model sees a definition.
    name = str(tool.get("name") or tool.get("type") or "tool") if isinstance(tool, Mapping) else "tool"
    return {"type": RESPONSES_FUNCTION, "function": {"name": name, "description": canonical_json(tool)}}


def build_view(body: Mapping[str, Any]) -> View:
    """The chat-shaped view: one view message per ``input`` item (refs: the item index, None for
    ``instructions`` and a string ``input``)."""
    if not isinstance(body, Mapping):
        raise MalformedRequestError("request", f"expected a JSON object, got {type(body).__name__}")
    messages: list[dict[str, Any]] = []
    refs: list[int | None] = []
    no_edit: set[int] = set()
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise MalformedRequestError("instructions", f"expected a string, got {type(instructions).__name__}")
        messages.append({"role": "system", "content": instructions})
        refs.append(None)
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        refs.append(None)
        items = []
    elif not isinstance(items, list):
        raise MalformedRequestError("input", "missing, or not a string or a list of items")
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise MalformedRequestError(where, f"expected an item object, got {type(item).__name__}")
        kind = responses_item_type(item)
        if not isinstance(kind, str):
            raise MalformedRequestError(f"{where}.type", f"expected a string, got {type(kind).__name__}")
        if kind == "message":
            role = item.get("role")
            if role not in _ROLES:
                raise MalformedRequestError(f"{where}.role", f"expected one of {', '.join(_ROLES)}, got "
                                            f"{'another string' if isinstance(role, str) else type(role).__name__}")
            view = {"role": role, "content": _content(item.get("content"), f"{where}.content")}
            parts = item.get("content")
            if isinstance(parts, list) and any(isinstance(p, Mapping) and p.get("annotations") for p in parts):
                no_edit.add(len(messages))  # citations index into its text: shortened, they would be lost
        elif kind == "function_call":
            call = {"id": str(item.get("call_id", "")), "type": "function",
                    "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))}}
            view = {"role": "assistant", "content": None, "tool_calls": [call]}
        elif kind == "function_call_output":
            output = item.get("output")
            view = {"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                    "content": output if isinstance(output, str) else _content(output or "", f"{where}.output")}
        elif kind == "reasoning":
            summary_items = item.get("summary") or []
            if not isinstance(summary_items, list):
                raise MalformedRequestError(f"{where}.summary", f"expected a list, got {type(summary_items).__name__}")
            summary = " ".join(str(s.get("text", "")) for s in summary_items if isinstance(s, Mapping))
            encrypted = item.get("encrypted_content")
            visible = summary + canonical_json(item.get("content") or "")
            content: list[dict[str, Any]] = [{"type": "text", "text": visible}]
            if isinstance(encrypted, str) and encrypted:
                # billed when replayed inside a tool loop: 7.6-9.3 base64 characters a token (measured)
                content.append({"type": THOUGHT_SIGNATURE, "signature": encrypted})
            view = {"role": "assistant", "content": content}
            no_edit.add(len(messages))
        elif kind == "additional_tools":
            # tools added at this point of the history (Codex's "responses lite"): instructions to the model,
            # never cut, never dropped
            view = {"role": "developer", "content": canonical_json(item.get("tools"))}
        elif (pairing := _pairing(item)) is not None:
            # A built-in tool's call and its output (``custom_tool_call``, ``local_shell_call``,
            # ``computer_call``...): a tool call and its result in the view, so they leave together; never edited.
            call_id, is_output = pairing
            if is_output:
                view = {"role": "tool", "tool_call_id": call_id, "content": _builtin_output(item, where)}
            else:
                name = item.get("name") if isinstance(item.get("name"), str) else str(kind)
                view = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": canonical_json(item)}}]}
            no_edit.add(len(messages))
        else:
            # Server-side tool calls (web search, code interpreter...), item references...: counted as their JSON,
            # never edited; content parts such an item carries (LiteLLM's bridge to other providers forwards them
            # as a message's parts) priced as parts.
            view = {"role": "assistant", "content": _other_item(item, where)}
            no_edit.add(len(messages))
        messages.append(view)
        refs.append(index)

    # the counter prices a Responses request's items as gpt-5.x bills them, with or without tools (a chat
    # client sending this key only makes its own count larger)
    request: dict[str, Any] = {"model": body.get("model"), "messages": messages, RESPONSES_VIEW: True, **carried(body)}
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        request["tools"] = [_tool(tool) for tool in tools]
        choice = body.get("tool_choice")
        if isinstance(choice, str):
            request["tool_choice"] = choice
        elif isinstance(choice, Mapping) and choice.get("type") == "function":
            request["tool_choice"] = {"type": "function", "function": {"name": str(choice.get("name", ""))}}
    text = body.get("text")
    text_format = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(text_format, Mapping) and text_format.get("type") == "json_schema":
        # the whole format, as chat's ``response_format`` holds it: its name and description are read by the model
        # (an attack review, 2026-12-07: a description of 18,000 tokens was counted as nothing)
        request["response_format"] = {"type": "json_schema", "json_schema": {
            key: value for key, value in text_format.items() if key != "type"}}
    # A function_call_output whose call is not in ``input`` answers a call the server holds (a continuation
    # with ``previous_response_id``): it must reach the model, so it is never dropped.
    calls = {pairing[0] for item in items
             if isinstance(item, Mapping) and (pairing := _pairing(item)) is not None and not pairing[1]}
    keep = frozenset(view_index for view_index, message in enumerate(messages)
                     if message.get("role") == "tool" and message.get("tool_call_id") not in calls)
    return View(request, tuple(refs), no_edit=frozenset(no_edit), keep=keep)


def _notes(body: Mapping[str, Any]) -> tuple[str, ...]:
    return (SERVER_HISTORY_NOTE,) if body.get("previous_response_id") or body.get("conversation") else ()


def count_responses(body: Mapping[str, Any], counter: TokenCounter) -> int:
    return SHAPE.count(body, counter)


def trim_responses(body: Mapping[str, Any], *, counter: TokenCounter, budget: Budget,
                   policy: TrimPolicy = TrimPolicy()) -> TrimResult:
    return SHAPE.trim(body, counter=counter, budget=budget, policy=policy)


def _compacted(item: Mapping[str, Any], edited: Mapping[str, Any]) -> Mapping[str, Any]:
    """An output's text becomes the edited text; its other parts (images, files) stay."""
    if item.get("type") != "function_call_output":
        return item
    output = item.get("output")
    if not isinstance(output, list):
        return {**item, "output": message_text(edited)}
    return {**item, "output": [{"type": "input_text", "text": message_text(edited)},
                               *(p for p in output if not (isinstance(p, Mapping) and p.get("type") in
                                                           ("input_text", "output_text", "text")))]}


def _shortened(item: Mapping[str, Any], edited: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text parts become one, in the part type the item's role takes (``output_text`` for the assistant,
    ``input_text`` for a user or the opening context); other parts (images, files) stay."""
    text = message_text(edited)
    content = item.get("content")
    if not isinstance(content, list):
        return {**item, "content": text}
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []} \
        if item.get("role") == "assistant" else {"type": "input_text", "text": text}
    texts = ("input_text", "output_text", "text")
    return {**item, "content": [part, *(p for p in content if not (isinstance(p, Mapping) and p.get("type") in texts))]}


def _images_removed(item: Mapping[str, Any], edited: Mapping[str, Any]) -> Mapping[str, Any]:
    field = "output" if item.get("type") == "function_call_output" else "content"
    parts = item.get(field)
    if not isinstance(parts, list):
        return item
    placeholder = {"type": "input_text", "text": IMAGE_PLACEHOLDER}
    return {**item, field: [placeholder if isinstance(p, Mapping) and p.get("type") == "input_image" else p
                            for p in parts]}


#: per editing action: an input item and its edited view message -> the new item
WRITERS = {"compacted": _compacted, "images_removed": _images_removed, "shortened": _shortened}


def _apply(body: Mapping[str, Any], view: View, result: TrimResult) -> dict[str, Any]:
    actions, edited_views = view_decisions(view, result)
    items = body["input"]
    dropped: set[int] = set()
    replaced: dict[int, Mapping[str, Any]] = {}
    for view_index, action in actions.items():
        item_index = view.refs[view_index]
        if item_index is None:
            continue
        item = items[item_index]
        if action.action == "dropped":
            dropped.add(item_index)
            continue
        replaced[item_index] = WRITERS[action.action](item, edited_views[view_index])
    placed: list[Placed] = [(i, replaced.get(i, item)) for i, item in enumerate(items) if i not in dropped]
    notice = result.report.notice
    if notice is not None:
        placed = place_notice(placed, view.refs[notice.after] if notice.after is not None else None,
                              {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": notice.text}]})
    return {**body, "input": [item for _, item in placed]}


def _native_action(action: MessageAction, view: View, body: Mapping[str, Any]) -> MessageAction:
    item_index = view.refs[action.index]
    if item_index is None:  # pragma: no cover - instructions are never touched
        return action
    item = body["input"][item_index]
    role = item.get("role") or item.get("type", "message")
    return replace(action, index=item_index, role=str(role), content_hash=content_hash(item),
                   tool_call_id=item.get("call_id") if isinstance(item.get("call_id"), str) else None)


#: the hosted MCP tool's approval items: the field naming the request they pair by
_APPROVALS = {"mcp_approval_request": "id", "mcp_approval_response": "approval_request_id"}


def _pairing(item: Mapping[str, Any]) -> tuple[str, bool] | None:
    """(call id, is it the output) for an item that pairs by ``call_id``: ``function_call`` and
    ``function_call_output`` (the id as text, whatever it is), and a built-in tool's call and output:
    ``custom_tool_call`` and ``custom_tool_call_output``, ``local_shell_call``, ``computer_call``, ``shell_call``,
    ``apply_patch_call``... (any ``*_call`` / ``*_call_output`` carrying a string ``call_id``; the server-side
    ones, such as ``web_search_call``, carry none); and an ``mcp_approval_request`` (by its ``id``) with the
    ``mcp_approval_response`` naming it (``approval_request_id``). None for anything else."""
    kind, call_id = item.get("type"), item.get("call_id")
    if not isinstance(kind, str):
        return None
    if kind in ("function_call", "function_call_output"):
        return str(call_id), kind == "function_call_output"
    if kind in _APPROVALS:  # a hosted MCP tool's approval request (its own ``id``) and the client's answer to it
        approval_id = item.get(_APPROVALS[kind])
        return (approval_id, kind == "mcp_approval_response") if isinstance(approval_id, str) else None
    if not isinstance(call_id, str):
        return None
    if kind.endswith("_call_output"):
        return call_id, True
    return (call_id, False) if kind.endswith("_call") else None


def responses_pairing_problems(items: Any) -> list[str]:
    """An output (``function_call_output``, or a built-in tool's, such as ``custom_tool_call_output``, or an
    ``mcp_approval_response``) whose ``call_id`` matches no earlier call, or a call left without output before
    the next user message (what the Responses API rejects; an approval request may stay unanswered)."""
    if not isinstance(items, list):
        return []
    problems, calls, answered = [], {}, set()
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = responses_item_type(item)
        pairing = _pairing(item)
        if pairing is not None and not pairing[1]:
            calls[pairing[0]] = index
            if kind == "mcp_approval_request":
                answered.add(pairing[0])  # found, but it needs no answer
        elif pairing is not None:
            call_id = pairing[0]
            if call_id not in calls:
                problems.append(f"input[{index}]: {kind} for {call_id} has no call")
            answered.add(call_id)
        elif kind == "message" and item.get("role") == "user":
            for call_id in sorted(set(calls) - answered):
                problems.append(f"input[{calls[call_id]}]: call {call_id} has no output")
            calls, answered = {}, set()
    return problems


def _touched_content(body: Mapping[str, Any], action: MessageAction) -> str:
    item = touched_item(body, "input", action)
    if item is None:
        return ""
    value = item.get("output") if item.get("type") == "function_call_output" else item.get("content")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(p.get("text", "")) for p in value if isinstance(p, Mapping))
    return canonical_json(item)


def _unreadable_part(part: Any) -> str | None:
    if isinstance(part, Mapping) and part.get("type") == "input_file":  # as the view has it (a data URL in file_url)
        return unreadable_as_sent(_part(part, "input_file"))
    if isinstance(part, Mapping) and part.get("type") == "input_image":  # as the view has it (a gs:// URL, a PDF)
        return unreadable_as_sent({"type": "image_url", "image_url": {"url": part.get("image_url")}})
    return None


def _unreadable(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    # a message's parts, and those a tool's output returns (``function_call_output``, ``custom_tool_call_output``)
    return [*unreadable_parts(body.get("input"), "input", "content", _unreadable_part),
            *unreadable_parts(body.get("input"), "input", "output", _unreadable_part)]


def _detect(body: Mapping[str, Any]) -> bool:
    return "input" in body and "messages" not in body


def _problems(body: Mapping[str, Any]) -> list[str]:
    problems = responses_pairing_problems(body.get("input"))
    if body.get("previous_response_id") or body.get("conversation"):
        # the server holds the earlier calls: an output answering one of them is no problem
        problems = [p for p in problems if not p.endswith("has no call")]
    return problems


def failed_events(call_id: Any, code: str, message: str, model: str = "") -> str:
    """The Responses API's streamed failure, as SSE text: ``response.created`` then ``response.failed``
    whose ``response.error.code`` is the refusal's code (``context_length_exceeded``). Codex compacts on it,
    where a plain HTTP 400 fails its turn with the raw JSON. Both events carry every field of the Responses
    API's ``Response`` object, ``model`` (the request's model group) included: the Vercel AI SDK validates
    ``response.created`` against that schema and, finding no ``model``, errors the stream before it reads
    ``response.failed``."""
    response = {"id": f"resp_budget_hook_{call_id or 'blocked'}", "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "background": False, "error": None, "incomplete_details": None,
                "instructions": None, "max_output_tokens": None, "max_tool_calls": None, "model": model or "",
                "output": [], "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
                "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "auto",
                "store": False, "temperature": None, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
                "tools": [], "top_logprobs": 0, "top_p": None, "truncation": "disabled", "usage": None,
                "user": None, "metadata": {}}
    failed = {**response, "status": "failed", "error": {"code": code, "message": message}}
    events = [("response.created", {"type": "response.created", "sequence_number": 0, "response": response}),
              ("response.failed", {"type": "response.failed", "sequence_number": 1, "response": failed})]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


SHAPE = ConversationShape(
    name="responses",
    # /responses/compact: a Responses-shaped input the provider compacts
    call_types=frozenset({"aresponses", "responses", "acompact_responses", "compact_responses"}),
    routes=("/responses", "/v1/responses", "/responses/compact", "/v1/responses/compact"),
    metadata_key="litellm_metadata",
    output_token_fields=OUTPUT_TOKEN_FIELDS,
    content_fields=("input", "instructions", "tools", "tool_choice", "text"),
    param="input",
    output_param="max_output_tokens",
    detect=_detect,
    view=build_view,
    apply=_apply,
    writers=WRITERS,
    native_action=_native_action,
    problems=_problems,
    touched_content=_touched_content,
    unreadable=_unreadable,
    references=responses_references,
    notes=_notes,
    remedy="Shorten the latest input, lower max_output_tokens, or use a model with a larger context window.",
    streamed_error=failed_events,
)
