"""How Anthropic ``/v1/messages`` content reads as the chat shape: messages, blocks, tools, options.

Contract: pure functions, never mutating their input; every piece of text the model sees is carried
over, so counting the result with an Anthropic ``TokenizerProfile`` estimates what Anthropic bills.
``convert_message`` turns one native message into chat messages (``tool_use`` -> assistant
``tool_calls``, ``tool_result`` -> ``tool`` messages, images and documents -> parts; earlier turns'
thinking left out, as Anthropic does not bill it); ``envelope`` converts everything around the messages
(``system``, ``tools``, ``tool_choice``, ``output_format``, ``thinking``, ``max_tokens``). The shape
module (``anthropic``) builds its view from these, message by message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..counting import canonical_json
from ..counting.parts import citations, document_parts, image_part
from ..counting.rendered import carried
from ..counting.tools import beside, with_examples
from ..errors import MalformedRequestError
from ..trimming.structure import thought_once_step

#: ``json.dumps(value, ensure_ascii=False)``, without building an encoder per call
_ARGUMENTS = json.JSONEncoder(ensure_ascii=False)


def envelope(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-shaped request around the messages: system, tools, tool choice and options."""
    if not isinstance(body, Mapping):
        raise MalformedRequestError("request", f"expected a JSON object, got {type(body).__name__}")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _blocks_to_text(system, "system")})
    result: dict[str, Any] = {"model": body.get("model"), "messages": messages, **carried(body)}
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        result["tools"] = [_convert_tool(tool) for tool in tools if isinstance(tool, Mapping)]
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping):
            kind = choice.get("type")
            if kind == "tool" and isinstance(choice.get("name"), str):
                result["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
            elif kind == "any":
                result["tool_choice"] = "required"
            elif kind == "none":
                result["tool_choice"] = "none"
    output_format = body.get("output_format")
    output_config = body.get("output_config")
    if isinstance(output_config, Mapping) and isinstance(output_config.get("format"), Mapping):
        output_format = output_config["format"]
    if isinstance(output_format, Mapping) and output_format.get("type") == "json_schema":
        result["response_format"] = {"type": "json_schema", "json_schema": {"schema": output_format.get("schema")}}
    if isinstance(body.get("thinking"), Mapping):
        result["thinking"] = dict(body["thinking"])
    if isinstance(output_config, Mapping):
        result["output_config"] = dict(output_config)
    if body.get("max_tokens") is not None:
        result["max_tokens"] = body["max_tokens"]
    return result


def _blocks_to_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for block in value:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                texts.append(canonical_json(block))
        return "\n".join(texts)
    raise MalformedRequestError(where, f"expected a string or a list of blocks, got {type(value).__name__}")


def current_turn_start(messages: list) -> int:
    """Index of the last user message that is not only tool results (where the current turn starts).

    Anthropic strips thinking blocks of earlier turns from the context and does not bill them; only the
    current turn's thinking (a tool-use loop in progress) counts.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str) or not isinstance(content, list):
            return index
        if any(not (isinstance(b, Mapping) and b.get("type") == "tool_result") for b in content):
            return index
    return 0


def rewritable_block(block: Any) -> bool:
    """Can a cut of this block's view text be written back as text? Plain text, a tool call, an image, a tool result
    holding only those: yes. A document or search result (its view text is a rendering of it, and the block stays:
    a compacted result sent it twice, a tenth review found), cited text (its citations would be lost), signed
    thinking, a server tool's block: no, and a message or result holding one is never edited."""
    kind = block.get("type") if isinstance(block, Mapping) else None
    if kind == "text":
        return isinstance(block.get("text"), str) and not block.get("citations")
    if kind == "tool_result":
        inner = block.get("content")
        return not isinstance(inner, list) or all(
            isinstance(b, Mapping) and (b.get("type") == "image" or (b.get("type") == "text" and rewritable_block(b)))
            for b in inner)
    return kind in ("tool_use", "image")


def thinking_opening(messages: list, start: int, thinking: Any) -> int | None:
    """The current turn's (from ``start``) first assistant message when it alone opens with a thinking block and
    ``thinking`` (the request's) is on (``trimming.structure.thought_once_step``: Anthropic answers "Expected
    `thinking` or `redacted_thinking`, but found `tool_use`" to a turn in progress without it)."""
    if not (isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")):
        return None
    return thought_once_step(messages, start, _opens_with_thinking)


def _opens_with_thinking(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, Mapping) and first.get("type") in ("thinking", "redacted_thinking")


def _described(role: Any) -> str:
    """A role the format does not know, described without quoting it (it is client text)."""
    return "nothing" if role is None else "another string" if isinstance(role, str) else type(role).__name__


def convert_message(message: Any, where: str, *, keep_thinking: bool = True,
                     inline_tool_images: bool = False) -> list[dict[str, Any]]:
    if not isinstance(message, Mapping):
        raise MalformedRequestError(where, "expected an object")
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise MalformedRequestError(f"{where}.role", "expected 'user' or 'assistant', got "
                                    + _described(role))
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise MalformedRequestError(f"{where}.content", "expected a string or a list of content blocks")
    parts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    tool_messages: list[dict[str, Any]] = []
    trailing_images: list[dict[str, Any]] = []
    for block_index, block in enumerate(content):
        if type(block) is not dict and not isinstance(block, Mapping):
            raise MalformedRequestError(f"{where}.content[{block_index}]", "expected a content block object")
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(image_part(block))
        elif kind == "document":
            parts.extend(document_parts(block))
        elif kind == "container_upload":  # a file by id: flagged, counted at the flat estimate
            parts.append({"type": "file", "file": {"file_id": canonical_json(block)}})
        elif kind == "search_result":
            parts.append({"type": "text", "text": canonical_json(block)})
            parts.extend(citations(block))
        elif kind == "tool_use":
            arguments = _ARGUMENTS.encode(block.get("input", {}))
            tool_calls.append(
                {
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {"name": str(block.get("name", "")), "arguments": arguments},
                }
            )
        elif kind == "tool_result":
            text, images = tool_result_content(block.get("content"), f"{where}.content[{block_index}]")
            tool_message: dict[str, Any] = {"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                                            "content": text}
            if block.get("is_error") is True:
                tool_message["is_error"] = True
            if inline_tool_images and images:
                # The trimming view keeps a result's images inside its tool message, so the result stays
                # one unit (a separate user message would look like the start of a new turn).
                tool_message["content"] = [{"type": "text", "text": text}, *images]
            else:
                trailing_images.extend(images)
            tool_messages.append(tool_message)
        elif kind in ("thinking", "redacted_thinking") and not keep_thinking:
            continue
        elif kind == "thinking":
            parts.append({"type": "text", "text": str(block.get("thinking", "")) + str(block.get("signature", ""))})
        elif kind == "redacted_thinking":
            parts.append({"type": "text", "text": str(block.get("data", ""))})
        else:
            parts.append({"type": "text", "text": canonical_json(block)})
    converted: list[dict[str, Any]] = list(tool_messages)
    if trailing_images:
        converted.append({"role": "user", "content": trailing_images})
    if parts or tool_calls or not converted:
        out: dict[str, Any] = {"role": role, "content": parts or None}
        if tool_calls:
            out["tool_calls"] = tool_calls
        converted.append(out)
    return converted


def tool_result_content(content: Any, where: str) -> tuple[str, list[dict[str, Any]]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise MalformedRequestError(f"{where}.content", "expected a string or a list of blocks")
    texts, images = [], []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "image":
            images.append(image_part(block))
        elif isinstance(block, Mapping) and block.get("type") == "document":
            images.extend(document_parts(block))
        elif isinstance(block, Mapping) and block.get("type") == "search_result":
            texts.append(canonical_json(block))
            images.extend(citations(block))
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        else:
            texts.append(canonical_json(block))
    return "\n".join(texts), images


#: a Claude tool's keys its view function is built from
_BUILT_FROM = frozenset({"name", "description", "input_schema", "input_examples"})


def _convert_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "input_schema" in tool or tool.get("type") in (None, "custom"):
        function = {"name": str(tool.get("name", "")), "parameters": tool.get("input_schema") or {}}
        if tool.get("description"):
            function["description"] = str(tool["description"])
        return {**beside(tool, _BUILT_FROM), "type": "function", "function": with_examples(function, tool)}
    # Server tools (web_search_20250305, bash_20250124, ...): the model sees their definition.
    name = str(tool.get("name", tool.get("type", "")))
    return {"type": "function", "function": {"name": name, "description": canonical_json(tool)}}
