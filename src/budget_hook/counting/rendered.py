"""Text LiteLLM or the provider renders into the prompt besides the messages and tools (pure; never raises).

* ``prompt_fields_text(request)``: top-level fields a provider reads into the prompt (``PROMPT_FIELDS``), in the
  body or in ``extra_body`` (which LiteLLM merges): a chat body's ``system`` (sent to Claude as its system prompt),
  Cohere's ``preamble``, ``documents`` and ``chat_history`` (LiteLLM forwards a provider's own parameters), and what
  a self-hosted server's chat template reads without a template configured here (``documents``,
  ``chat_template_kwargs``). Counted as their text, JSON when not a string: an attack review (2026-12-06) sent
  10,000 tokens in each to a Cohere or vLLM deployment, counted as 9-40.
* ``ollama/`` (``TokenizerProfile.tools_as_text``): LiteLLM writes the tools into the prompt, appending
  ``function_call_prompt``'s sentence and every tool's Python repr to *each* system message (one more system
  message when there is none): 734 tokens counted, 9,635 sent with 25 system messages. ``ollama_pt`` writes an
  assistant's tool calls again, re-serialised (``Tool Calls: json.dumps(calls, indent=2)``, non-ASCII escaped):
  5,322 counted, 25,084 sent for four calls writing Chinese text. ``function_prompt`` and ``calls_text`` give
  that text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .canonical import canonical_json

#: top-level fields whose text reaches the prompt besides the messages (see the module; Cohere's v1 route sends a
#: client's own ``message`` and ``tool_results`` when the conversation ends on a tool result: counted always)
PROMPT_FIELDS = ("system", "preamble", "documents", "chat_history", "chat_template_kwargs", "message", "tool_results")


def carried(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a native shape's chat view carries over from ``body`` so that it is counted as on chat (LiteLLM bridges
    /v1/messages and /v1/responses to chat deployments with these fields): all of ``PROMPT_FIELDS`` but ``system``
    (the view makes a message of a native system prompt), and ``extra_body``."""
    return {name: body[name] for name in (*PROMPT_FIELDS[1:], "extra_body") if name in body}


#: ``litellm_core_utils.prompt_templates.factory.function_call_prompt``'s sentence: LiteLLM 1.108's, the longer
#: (1.103 writes 'Produce JSON OUTPUT ONLY! Adhere to this format {...} The following functions are available to you:')
FUNCTION_PROMPT = ('To call a function, reply with JSON ONLY in this format {"name": "function_name", "arguments":'
                   '{"argument_name": "argument_value"}}. Once a function result answers the request, reply to the '
                   'user in plain text instead of calling a function again. The following functions are available to '
                   'you:')


def with_extra_body(request: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``request`` and its ``extra_body`` (whose fields LiteLLM merges into the body it sends), each with the prefix
    that names its fields in a path ("" and "extra_body.")."""
    extra = request.get("extra_body")
    return [("", request), *([("extra_body.", extra)] if isinstance(extra, Mapping) else [])]


def prompt_fields_text(request: Mapping[str, Any]) -> list[str]:
    """The text of each ``PROMPT_FIELDS`` value set in ``request`` or its ``extra_body``."""
    return [value if isinstance(value, str) else canonical_json(value)
            for _, source in with_extra_body(request) for name in PROMPT_FIELDS if (value := source.get(name))]


def function_prompt(request: Mapping[str, Any], messages: Sequence[Any]) -> tuple[str, int]:
    """The text ``function_call_prompt`` appends for the request's tools (or legacy functions), and how many times:
    once per system message, or once (a system message of its own) when there is none; ("", 0) without tools."""
    tools = request.get("tools") or request.get("functions")
    if not isinstance(tools, list) or not tools:
        return "", 0
    text = " " + FUNCTION_PROMPT + "".join(f"\n{tool}\n" for tool in tools)  # str(tool): Python's repr
    systems = sum(isinstance(m, Mapping) and "system" in str(m.get("role")) for m in messages)
    return text, max(1, systems)


def calls_text(tool_calls: Sequence[Any]) -> str:
    """``ollama_pt``'s ``Tool Calls: ...`` for one message's tool calls ("" when LiteLLM could not render them: it
    raises on arguments that are not JSON, and nothing is sent)."""
    rendered = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        try:
            parsed = json.loads(arguments) if isinstance(arguments, (str, bytes)) else arguments
        except (ValueError, RecursionError):
            return ""
        rendered.append({"id": call.get("id") if isinstance(call, Mapping) else None, "type": "function",
                         "function": {"name": function.get("name") if isinstance(function, Mapping) else None,
                                      "arguments": parsed}})
    try:
        return "Tool Calls: " + json.dumps(rendered, indent=2)
    except (TypeError, ValueError, RecursionError):
        return ""


def thinking_enabled(request: Mapping[str, Any]) -> bool:
    """Extended thinking, an effort level or a task budget (Anthropic fields) add a hidden prompt."""
    thinking = request.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive"):
        return True
    output_config = request.get("output_config")
    return isinstance(output_config, Mapping) and bool({"effort", "task_budget"} & set(output_config))


#: JSON values read one by one from a call's ``arguments`` at most (``split_values``); past them, every remaining
#: character counts as one more value (an upper bound: two values take two characters at least)
MAX_SPLIT_VALUES = 64
_DECODER = json.JSONDecoder()
#: what LiteLLM skips between two values (``" \t\n\r"``)
_GAP = re.compile(r"[ \t\n\r]*")


def split_values(arguments: Any) -> int:
    """How many tool calls LiteLLM sends for one call's ``arguments``: one, but for a string ``json.loads`` refuses,
    one per JSON value it holds (``split_concatenated_json_objects``: Bedrock Converse writes a ``toolUse`` block for
    each, repeating the tool's name, id ``<id>_<n>``). An attack review (2026-12-06) sent ``"{}" * 600``: 1,239
    tokens counted, 21,081 sent as 600 tool calls."""
    if not isinstance(arguments, str) or not arguments.strip():
        return 1
    try:
        json.loads(arguments)
        return 1
    except (ValueError, RecursionError):
        pass
    raw, at, values = arguments.strip(), 0, 0
    while at < len(raw) and values < MAX_SPLIT_VALUES:
        at = _GAP.match(raw, at).end()  # type: ignore[union-attr]  # a star matches everywhere
        if at >= len(raw):
            break
        try:
            at = _DECODER.raw_decode(raw, at)[1]
        except (ValueError, RecursionError):
            return max(1, values)
        values += 1
    return max(1, values + (len(raw) - at if at < len(raw) else 0))


def repeated_answers(messages: Sequence[Any]) -> list[str]:
    """For each tool (or function) result, its call's name and arguments (the longest of the calls with its id):
    Cohere's v1 prompt writes them into every result, looked up by id (``==``) among all the calls
    (``convert_openai_message_to_cohere_tool_result``), besides the call itself when the calling message has text;
    the count has them once, in the assistant's call. An attack review (2026-12-06) sent fifteen results for one
    call: 1,726 tokens counted, 17,645 sent."""
    calls: dict[Any, str] = {}
    for message in messages:
        for call in (message.get("tool_calls") if isinstance(message, Mapping) else None) or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                key = _equal_as(call.get("id"))
                text = f"{function.get('name')} {function.get('arguments')}"
                calls[key] = max(calls.get(key, ""), text, key=len)
    return [calls[answer] for message in messages if isinstance(message, Mapping)
            and message.get("role") in ("tool", "function")
            and (answer := _equal_as(message.get("tool_call_id"))) in calls]


def _equal_as(value: Any) -> Any:
    """A key equal (and hashing alike) for values ``==`` holds equal: ids of any JSON type match as LiteLLM's ``==``
    matches them (a list or an object too: an attack review sent array ids, 1,266 counted, 13,058 sent)."""
    if isinstance(value, list):
        return ("list", tuple(_equal_as(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", frozenset((key, _equal_as(item)) for key, item in value.items()))
    return ("null",) if value is None else value  # a missing id is ``None``: equal to another missing one


#: what of an assistant's ``provider_specific_fields`` LiteLLM turns into content (Claude's and Gemini's converters);
#: the rest is not sent (a response's own copies of its thinking blocks and citations, which clients send back)
CONTENT_FIELDS = ("compaction_blocks", "tool_results", "web_search_results", "server_side_tool_invocations")


def carried_fields(message: Mapping[str, Any]) -> list[Any]:
    """What LiteLLM turns into content from a message's other fields: ``provider_specific_fields``' Claude
    ``compaction_blocks``, ``tool_results`` and ``web_search_results`` (sent as content blocks) and Gemini
    ``server_side_tool_invocations`` (sent as ``toolCall``/``toolResponse`` parts), and a tool result's
    ``search_results`` (Bedrock Converse sends them instead of its content). Counted as their JSON; an attack review
    (2026-12-06): 32 tokens counted, 11,912 sent to Claude; 21 and 11,969 to Gemini; 60 and 7,201 to Bedrock. (Its
    other keys are not sent: a Claude answer's copy of its thinking blocks, sent back as is, is counted once.)"""
    found: list[Any] = []
    fields = message.get("provider_specific_fields")
    if isinstance(fields, Mapping):
        found += [fields[key] for key in CONTENT_FIELDS if fields.get(key) not in (None, "")]
    if message.get("search_results") not in (None, ""):
        found.append(message["search_results"])
    return found
