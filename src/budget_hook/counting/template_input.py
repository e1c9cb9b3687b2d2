"""What a self-hosted server's template gets, as opposed to what the client sent (pure; for ``templated``).

* ``served``: LiteLLM's role mapping inside ``completion()`` (after the gateway's check);
* ``prepared``: vLLM's preparation of a message (text parts joined, tool-call arguments parsed);
* ``template_extras``: the request fields vLLM hands the template besides messages and tools;
* ``dropped``: the text of each message the template left out of the prompt (counted at the family's
  estimate on top: a configured template never counts a message as less than what it leaves out).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .rendered import with_extra_body

#: request fields (or ``extra_body`` fields) vLLM hands to the template: ``template_extras``
TEMPLATE_FIELDS = ("chat_template_kwargs", "documents", "continue_final_message", "add_generation_prompt")
#: template variables the counter sets itself: a client's ``chat_template_kwargs`` cannot replace them
_RESERVED = frozenset({"messages", "tools", "documents", "add_generation_prompt", "continue_final_message"})
#: messages missing from their own part of the prompt looked for in the whole prompt (each search reads it all)
WHOLE_PROMPT_SEARCHES = 8


def served(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A message as LiteLLM forwards it to a self-hosted server: ``completion()`` maps the ``developer`` role to
    ``system`` (keeping only the content) for every provider but OpenAI's o-series, after the gateway's check
    (``BaseConfig.translate_developer_role_to_system_role``, LiteLLM 1.103 and 1.108)."""
    if message.get("role") == "developer":
        return {"role": "system", "content": message.get("content")}
    return message


def template_extras(request: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The fields a server's template reads besides messages and tools (vLLM's ``chat_template_kwargs``,
    ``documents``, ``continue_final_message``, ``add_generation_prompt``), from the body or from
    ``extra_body`` (which LiteLLM merges last): the template's extra variables and whether it adds the reply
    opener. ``chat_template_kwargs`` wins over the fields, as vLLM merges them
    (``_chat_template_kwargs.update(request.chat_template_kwargs)``): its ``documents``,
    ``continue_final_message`` and ``add_generation_prompt`` are the ones rendered. Its messages, tools and
    special tokens never replace what the counter passes itself (a client's value for any of them is refused
    before any count, ``pipeline.bounds.server_overrides``); a ``chat_template`` of the client's is
    ``shapes.references``' business."""
    values: dict[str, Any] = {}
    for _, source in with_extra_body(request):
        values.update({name: source[name] for name in TEMPLATE_FIELDS if source.get(name) is not None})
    kwargs = values.get("chat_template_kwargs")
    extras = {k: v for k, v in kwargs.items() if isinstance(k, str) and k not in _RESERVED} \
        if isinstance(kwargs, Mapping) else {}
    if isinstance(kwargs, Mapping):  # vLLM: the kwargs over the request's own fields
        values.update({name: kwargs[name] for name in TEMPLATE_FIELDS[1:] if kwargs.get(name) is not None})
    if isinstance(values.get("documents"), list):
        extras["documents"] = values["documents"]
    if isinstance(values.get("continue_final_message"), bool):
        extras["continue_final_message"] = values["continue_final_message"]
    opener = values.get("add_generation_prompt")
    return extras, opener if isinstance(opener, bool) else True


def _holds(rendered: str, text: str) -> bool:
    return text in rendered or json.dumps(text, ensure_ascii=False)[1:-1] in rendered or \
        json.dumps(text)[1:-1] in rendered


def dropped(messages: Sequence[Mapping[str, Any]], owned: list[list[str]], prompt: str) -> list[str]:
    """Per message, its text when the template left it out of the prompt (an unknown role, a role it
    ignores), else "". Looked for in the pieces written while the template read the message, then (a
    template may write it later: Llama 3.1 moves the first user message under the tools) in the whole
    prompt, at most ``WHOLE_PROMPT_SEARCHES`` times: past that, a text not in its own pieces is dropped."""
    found: list[str] = []
    searches = WHOLE_PROMPT_SEARCHES
    for message, pieces in zip(messages, owned, strict=True):
        content = message.get("content")
        text = content.strip() if isinstance(content, str) else ""
        if text and not _holds("".join(pieces), text):
            searches -= 1
            if searches >= 0 and _holds(prompt, text):
                text = ""
        else:
            text = ""
        found.append(text)
    return found


def prepared(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as vLLM hands it to the template: text parts joined with a newline, content None as "",
    tool-call arguments parsed from JSON."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(p["text"] for p in content if isinstance(p, Mapping) and p.get("type") == "text"
                                   and isinstance(p.get("text"), str))
    elif content is None:
        out["content"] = ""
    calls = out.get("tool_calls")
    if isinstance(calls, list) and calls:
        parsed = []
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("arguments"), str):
                with contextlib.suppress(ValueError):
                    function = {**function, "arguments": json.loads(function["arguments"] or "{}")}
                call = {**call, "function": function}
            parsed.append(call)
        out["tool_calls"] = parsed
    return out
