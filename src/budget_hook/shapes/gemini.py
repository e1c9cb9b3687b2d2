"""Gemini's native ``generateContent`` / ``streamGenerateContent`` shape (LiteLLM's ``/v1beta/models/...``).

The body is seen through a chat-shaped view, counted and trimmed like every conversation:

* ``systemInstruction`` is the system message; each ``contents`` entry a user (``user``) or assistant
  (``model``) message; ``functionCall`` parts become tool calls, and each ``functionResponse`` part its own
  tool message, so a call and its response leave together and a response can be compacted alone;
* ``inlineData`` images are sized from their header, PDFs by their pages, text files as text, other media
  by size; ``fileData`` (a file URI) is content the request only references (flagged);
* thought signatures and thought text are counted as text (a replayed ``thoughtSignature`` is billed); a
  content carrying them is never rewritten (it stays whole or leaves with its turn); media sent along with
  ``functionResponse`` parts joins the last response's view message (it stays or leaves with it), and the
  user's text sent with them is a user message of its own after the responses (the turn starts there);
* ``tools`` (``functionDeclarations``; built-in tools as their JSON) and ``generationConfig``'s response
  schema are counted; ``generationConfig.maxOutputTokens`` is the output reserve.

A block uses Gemini's own sentence: ``The input token count (N) exceeds the maximum number of tokens
allowed (M).``
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..counting import canonical_json
from ..counting.parts import THOUGHT_SIGNATURE, gemini_part, unreadable_as_sent
from ..counting.tools import beside
from ..errors import MalformedRequestError
from ..trimming import IMAGE_PLACEHOLDER, MessageAction, TrimResult, content_hash, message_text
from .base import (
    ConversationShape,
    Placed,
    View,
    merge_new_neighbours,
    place_notice,
    touched_parts,
    unreadable_parts,
    view_decisions,
)
from .references import gemini_references

OUTPUT_FIELDS = ("generationConfig.maxOutputTokens", "generationConfig.max_output_tokens",
                 "config.maxOutputTokens", "config.max_output_tokens")


@dataclass(frozen=True)
class _Ref:
    content: int             # index in ``contents``
    parts: tuple[int, ...]   # part indexes in that entry


#: a part's data, one of which it carries (Gemini's ``Part.data`` oneof), by its two spellings
DATA_FIELDS = (("text", "text"), ("inlineData", "inline_data"), ("fileData", "file_data"),
               ("functionCall", "function_call"), ("functionResponse", "function_response"),
               ("executableCode", "executable_code"), ("codeExecutionResult", "code_execution_result"))


def _one_datum(parts: list[Any], where: str) -> list[Any]:
    """``parts``, each checked to carry one datum at most: Gemini refuses a second ("oneof field 'data' is
    already set"), and LiteLLM's generateContent adapter would forward one of them (``text`` first) where the
    count took another (a call's text would pass uncounted)."""
    for index, part in enumerate(parts):
        if isinstance(part, Mapping):
            # an empty ``text`` is no datum (Gemini reads it as unset; the adapter would forward nothing uncounted)
            present = [name for name, snake in DATA_FIELDS
                       if any(part.get(key) not in (None, "") for key in (name, snake))]
            if len(present) > 1:
                raise MalformedRequestError(f"{where}[{index}]", "a part carries one of text, inlineData, fileData, "
                                            f"functionCall, functionResponse...: this one has {' and '.join(present)}")
    return parts


def _parts(entry: Any, where: str) -> list[Any]:
    if not isinstance(entry, Mapping):
        raise MalformedRequestError(where, f"expected a content object, got {type(entry).__name__}")
    parts = entry.get("parts")
    if isinstance(parts, Mapping):
        return _one_datum([parts], f"{where}.parts")
    if not isinstance(parts, list):
        raise MalformedRequestError(f"{where}.parts", "missing or not a list of parts")
    return _one_datum(parts, f"{where}.parts")


def _any_parts(entry: Any) -> list[Any]:
    """``_parts`` for a look that must not fail: no parts for anything that is not a content with parts."""
    parts = entry.get("parts") if isinstance(entry, Mapping) else None
    return [parts] if isinstance(parts, Mapping) else parts if isinstance(parts, list) else []


def _chat_part(part: Any, where: str) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise MalformedRequestError(where, f"expected a part object, got {type(part).__name__}")
    return gemini_part(part)


def _signature(part: Any, streamed: bool, earlier: bool = False) -> list[dict[str, Any]]:
    """A replayed ``thoughtSignature`` is billed as input: counted per base64 character (``thought_signature``).
    ``earlier``: it belongs to a turn before the running one (billed by Gemini 3, not by 2.x: the counter's
    profile decides)."""
    signature = part.get("thoughtSignature") or part.get("thought_signature") if isinstance(part, Mapping) else None
    if not (isinstance(signature, str) and signature):
        return []
    return [{"type": THOUGHT_SIGNATURE, "signature": signature, "streamed": streamed, "earlier": earlier}]


def _response_parts(answer: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """Media a ``functionResponse`` carries in its own ``parts`` (an image or a PDF a tool returned)."""
    parts = answer.get("parts")
    if not isinstance(parts, list):
        return []
    return [_chat_part(p, f"{where}.parts[{i}]") for i, p in enumerate(_one_datum(parts, f"{where}.parts"))
            if isinstance(p, Mapping)]


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _call(part: Mapping[str, Any]) -> Mapping[str, Any] | None:
    call = part.get("functionCall") or part.get("function_call")
    return call if isinstance(call, Mapping) else None


def _response(part: Any) -> Mapping[str, Any] | None:
    if not isinstance(part, Mapping):
        return None
    response = part.get("functionResponse") or part.get("function_response")
    return response if isinstance(response, Mapping) else None


def build_view(body: Mapping[str, Any]) -> View:
    """One view message per content entry, and one per ``functionResponse`` part (refs: content, parts)."""
    if not isinstance(body, Mapping):
        raise MalformedRequestError("request", f"expected a JSON object, got {type(body).__name__}")
    contents = body.get("contents")
    if isinstance(contents, (str, Mapping)):
        contents = [{"role": "user", "parts": [{"text": contents}] if isinstance(contents, str) else contents}]
    if not isinstance(contents, list):
        raise MalformedRequestError("contents", "missing or not a list of contents")
    messages: list[dict[str, Any]] = []
    refs: list[_Ref | None] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        parts = [system] if isinstance(system, str) else _parts(system, "systemInstruction")
        messages.append({"role": "system", "content": [_chat_part(p if not isinstance(p, str) else {"text": p},
                                                                  "systemInstruction") for p in parts]})
        refs.append(None)
    pending: dict[str, list[str]] = {}  # function name -> ids of calls not answered yet
    no_edit: set[int] = set()
    # Replayed thought signatures: Gemini 2.x bills them only in the running turn's tool loop (from the latest
    # user text on) and only on streamGenerateContent (LiteLLM sets ``stream`` for that route); Gemini 3.x bills
    # those of earlier turns too (hidden bills: 0.57-0.81 of the bill without them). Each is marked with where
    # it sits, and the counter's profile, which knows the model, decides.
    current = _current_turn_start(contents)
    streamed = bool(body.get("stream"))
    for index, entry in enumerate(contents):
        where = f"contents[{index}]"
        parts = _parts(entry, where)
        role = "assistant" if entry.get("role") == "model" else "user"
        responses = [i for i, part in enumerate(parts) if _response(part) is not None]
        rest = [i for i in range(len(parts)) if i not in set(responses)]
        for i in responses:
            answer = _response(parts[i]) or {}
            name = str(answer.get("name", ""))
            call_id = (pending.get(name) or [f"{name}:unanswered"]).pop(0)
            text = canonical_json(answer.get("response", answer))
            media_parts = _response_parts(answer, f"{where}.parts[{i}].functionResponse")
            content: Any = [{"type": "text", "text": text}, *media_parts] if media_parts else text
            messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
            refs.append(_Ref(index, (i,)))
            if media_parts:
                no_edit.add(len(messages) - 1)  # a response with media stays whole or leaves with its call
        if responses and rest and not any(_text(parts[i]) for i in rest):
            # Media alone sent along with function responses (a file a tool returned) belong to the same exchange:
            # they join the last response's view message, so they stay or leave with it (and are never cut). The
            # user's text beside responses (an instruction mid-loop) is a user message of its own after them
            # (below), where ``_current_turn_start`` starts the turn: the trimmer protects it as a chat user message.
            last = messages[-1]
            extra = [piece for i in rest
                     for piece in (_chat_part(parts[i], f"{where}.parts[{i}]"),
                                   *_signature(parts[i], streamed, earlier=index < current))]
            head = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
            messages[-1] = {**last, "content": [*head, *extra]}
            refs[-1] = _Ref(index, (responses[-1], *rest))
            no_edit.add(len(messages) - 1)
        elif rest or not responses:
            calls = []
            chat_parts = []
            for i in rest:
                call = _call(parts[i]) if isinstance(parts[i], Mapping) else None
                if call is not None:
                    # named by what it is, not where it is: the view of a trimmed body keeps the same ids
                    call_id = f"{call.get('name', '')}:{_digest(call.get('args', {}))}"
                    pending.setdefault(str(call.get("name", "")), []).append(call_id)
                    calls.append({"id": call_id, "type": "function", "function": {
                        "name": str(call.get("name", "")), "arguments": canonical_json(call.get("args", {}))}})
                else:
                    chat_parts.append(_chat_part(parts[i], f"{where}.parts[{i}]"))
                chat_parts.extend(_signature(parts[i], streamed, earlier=index < current))
            message: dict[str, Any] = {"role": role, "content": chat_parts or None}
            if calls:
                message["tool_calls"] = calls
            if any(_signed(parts[i]) for i in rest):
                no_edit.add(len(messages))  # thought parts and signatures: kept whole or left with their turn
            messages.append(message)
            refs.append(_Ref(index, tuple(rest)))
    request: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    tools = _tools(body.get("tools"))
    if tools:
        request["tools"] = tools
    # every schema given, in either config (LiteLLM keeps the one its model takes, which need not be the first)
    schemas = [c[k] for c in (body.get("generationConfig"), body.get("config")) if isinstance(c, Mapping)
               for k in _SCHEMA_KEYS if c.get(k)]
    if schemas:
        request["response_format"] = {"type": "json_schema", "json_schema": {"schema": schemas}}
    return View(request, tuple(refs), no_edit=frozenset(no_edit))


_PARAMETER_KEYS = ("parameters", "parameters_json_schema", "parametersJsonSchema")
_RESPONSE_KEYS = ("response", "response_json_schema", "responseJsonSchema")
_SCHEMA_KEYS = ("responseSchema", "response_schema", "responseJsonSchema", "response_json_schema")


def _current_turn_start(contents: list[Any]) -> int:
    """The index of the latest user content that carries text (not only function responses): the turn
    whose tool loop is running starts there."""
    for index in range(len(contents) - 1, -1, -1):
        entry = contents[index]
        if isinstance(entry, Mapping) and entry.get("role") != "model" and any(
                _text(p) for p in _any_parts(entry)):
            return index
    return 0


def _text(part: Any) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("text"), str)


def _signed(part: Any) -> bool:
    return isinstance(part, Mapping) and bool(part.get("thought") or part.get("thoughtSignature")
                                              or part.get("thought_signature"))


def _tools(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations") \
            if isinstance(tool, Mapping) else None
        if isinstance(declarations, list):
            for declaration in declarations:
                if isinstance(declaration, Mapping):
                    chosen = next((k for k in _PARAMETER_KEYS if declaration.get(k)), None)
                    parameters: Any = declaration[chosen] if chosen else {}
                    function: dict[str, Any] = {"name": str(declaration.get("name", "")), "parameters": parameters}
                    response = next((declaration[k] for k in _RESPONSE_KEYS if declaration.get(k)), None)
                    # the description, and the declared result schema: both reach the prompt
                    described = [str(declaration["description"])] if declaration.get("description") else []
                    described += [canonical_json(response)] if response else []
                    if described:
                        function["description"] = " ".join(described)
                    # its other keys beside, where a self-hosted server's template gets them (``tools.sent_tools``)
                    used = frozenset({"name", "description", chosen or "", *_RESPONSE_KEYS})
                    out.append({**beside(declaration, used), "type": "function", "function": function})
        else:  # built-in tools (googleSearch, codeExecution...): the model sees a definition
            out.append({"type": "function", "function": {"name": "tool", "description": canonical_json(tool)}})
    return out


# --- writing decisions back -----------------------------------------------------------------------------


def _compacted(parts: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    out = []
    for part in parts:
        answer = _response(part)
        key = "functionResponse" if isinstance(part, Mapping) and "functionResponse" in part else "function_response"
        out.append({**part, key: {**answer, "response": {"content": message_text(edited)}}} if answer else part)
    return out


def _images_removed(parts: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    def is_image(part: Any) -> bool:
        data = part.get("inlineData") or part.get("inline_data") if isinstance(part, Mapping) else None
        return isinstance(data, Mapping) and str(data.get("mimeType") or data.get("mime_type", "")).startswith("image/")
    return [{"text": IMAGE_PLACEHOLDER} if is_image(part) else part for part in parts]


def _shortened(parts: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    """All text parts become one, at the first text part's place; other parts stay."""
    out, merged = [], False
    for part in parts:
        if not (isinstance(part, Mapping) and isinstance(part.get("text"), str)):
            out.append(part)
        elif not merged:
            out.append({"text": message_text(edited)})
            merged = True
    return out


WRITERS = {"compacted": _compacted, "images_removed": _images_removed, "shortened": _shortened}


def _apply(body: Mapping[str, Any], view: View, result: TrimResult) -> dict[str, Any]:
    actions, edited_views = view_decisions(view, result)
    contents = body["contents"]
    gone: dict[int, set[int]] = {}
    written: dict[int, dict[int, list[Any]]] = {}
    for view_index, action in actions.items():
        ref = view.refs[view_index]
        if ref is None:
            continue
        gone.setdefault(ref.content, set()).update(ref.parts)
        if action.action != "dropped":
            native = _parts(contents[ref.content], f"contents[{ref.content}]")
            written.setdefault(ref.content, {})[min(ref.parts)] = WRITERS[action.action](
                [native[i] for i in sorted(ref.parts)], edited_views[view_index])
    placed: list[Placed] = []
    for index, entry in enumerate(contents):
        if index not in gone:
            placed.append((index, entry))
            continue
        parts: list[Any] = []
        for part_index, part in enumerate(_parts(entry, f"contents[{index}]")):
            parts.extend(written.get(index, {}).get(part_index, ()))
            if part_index not in gone[index]:
                parts.append(part)
        if parts:
            placed.append((index, {**entry, "parts": parts}))
    notice = result.report.notice
    if notice is not None:
        ref = view.refs[notice.after] if notice.after is not None else None
        placed = place_notice(placed, ref.content if ref is not None else None,
                              {"role": "user", "parts": [{"text": notice.text}]})
    # Roles alternate in Gemini's turns: entries the trim made neighbours become one.
    return {**body, "contents": merge_new_neighbours(placed, lambda e: e.get("role", "user"), _merge)}


def _merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    return {**first, "parts": list(_parts(first, "contents")) + list(_parts(second, "contents"))}


def _native_action(action: MessageAction, view: View, body: Mapping[str, Any]) -> MessageAction:
    ref = view.refs[action.index]
    if ref is None:  # pragma: no cover - the system instruction is never touched
        return action
    entry = body["contents"][ref.content]
    return replace(action, index=ref.content, block=ref.parts[0] if len(ref.parts) == 1 else None,
                   role=str(entry.get("role", "user")), content_hash=content_hash(entry))


def gemini_pairing_problems(contents: Any) -> list[str]:
    """A ``functionResponse`` that answers no ``functionCall`` of the model turn just before it."""
    problems: list[str] = []
    called: list[str] = []
    for index, entry in enumerate(contents if isinstance(contents, list) else []):
        parts = _any_parts(entry)
        answers = [str((_response(p) or {}).get("name")) for p in parts if _response(p) is not None]
        for name in answers:
            if name not in called:
                problems.append(f"contents[{index}]: functionResponse {name!r} answers no functionCall before it")
        if isinstance(entry, Mapping) and entry.get("role") == "model":
            called = [str((_call(p) or {}).get("name")) for p in parts if isinstance(p, Mapping) and _call(p)]
        elif answers or parts:
            called = []
    return problems


def _touched_content(body: Mapping[str, Any], action: MessageAction) -> str:
    listed = touched_parts(body, "contents", "parts", action)
    parts: list[Any] = listed if isinstance(listed, list) else []
    return "\n".join(p["text"] if isinstance(p, Mapping) and isinstance(p.get("text"), str) else canonical_json(p)
                     for p in parts)


def _unreadable_part(part: Any) -> str | None:
    answer = _response(part)
    if answer is not None and isinstance(answer.get("parts"), list):  # what a function returned
        return next((f"{reason} (its functionResponse.parts[{i}])" for i, inner in enumerate(answer["parts"])
                     if (reason := _unreadable_part(inner))), None)
    if isinstance(part, Mapping) and isinstance(part.get("fileData") or part.get("file_data"), Mapping):
        return "a file by URI: its content is not in the request"
    return unreadable_as_sent(_chat_part(part, "part")) if isinstance(part, Mapping) else None


def _unreadable(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    return unreadable_parts(body.get("contents"), "contents", "parts", _unreadable_part)


def _overflow_wording(facts: Mapping[str, Any], tokens_before: int | None) -> str:
    tokens = facts.get("tokens_after_trimming", tokens_before)
    return f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({facts.get('budget')})."


def _adapted_output_fields(body: Mapping[str, Any]) -> tuple[str, ...]:
    """What LiteLLM's generateContent adapter reads for another provider's model (``google_genai/adapters``): only
    ``maxOutputTokens``, of ``config`` when the body has one, else of ``generationConfig``; any other spelling is
    dropped and Claude gets its own filled in (a review: 100 reserved, 64,000 sent)."""
    return ("config.maxOutputTokens",) if body.get("config") is not None else ("generationConfig.maxOutputTokens",)


def _error_body(status: int, message: str, code: str) -> dict[str, Any]:
    """Gemini's own error object: what google-genai's ``APIError`` reads (``code``, ``status``)."""
    return {"code": status, "message": message, "status": "INVALID_ARGUMENT", "details": [{"reason": code}]}


SHAPE = ConversationShape(
    name="gemini",
    call_types=frozenset({"agenerate_content", "agenerate_content_stream", "generate_content",
                          "generate_content_stream"}),
    routes=("/v1beta/models/{model}:generateContent", "/v1beta/models/{model}:streamGenerateContent"),
    metadata_key="metadata",
    output_token_fields=OUTPUT_FIELDS,
    content_fields=("contents", "systemInstruction", "system_instruction", "tools", "generationConfig", "config"),
    param="contents",
    output_param="generationConfig.maxOutputTokens",
    adapted_output_fields=_adapted_output_fields,
    detect=lambda body: "contents" in body,
    overflow_wording=_overflow_wording,
    error_body=_error_body,
    view=build_view,
    apply=_apply,
    writers=WRITERS,
    native_action=_native_action,
    problems=lambda body: gemini_pairing_problems(body.get("contents")),
    touched_content=_touched_content,
    unreadable=_unreadable,
    references=gemini_references,
    prompt_fields=("prompt_id",),  # the proxy never fills a stored prompt in before the hook on this route
    remedy="Shorten the latest content, lower maxOutputTokens, or use a model with a larger context window.",
)
