"""Content a request pulls in by reference, outside the messages its view counts (pure; never raises).

Some fields make the provider (or LiteLLM, after the gateway's check) add content the request does not
carry: a cached context (Gemini's ``cachedContent``, chat's ``cached_content``), a stored prompt (the
Responses API's ``prompt: {id}``, LiteLLM's ``prompt_id``), the tools of a remote MCP server, the skills of
an Anthropic container, stored ``item_reference`` items, the results of a search of LiteLLM's vector stores
(``vector_store_ids``, chat's ``file_search`` tool), the history behind ``previous_response_id`` or a
``conversation``, a chat template of the client's (vLLM's ``chat_template``: the prompt it makes is unknown).
The gateway cannot size any of them. Each shape lists them here as ``(path, why, tokens)``:

* ``tokens`` is ``FILE_REFERENCE_TOKENS``, the flat estimate counted (as untrimmable request overhead) and
  flagged under ``unreadable_content: estimate``, like a file referenced by id;
* ``tokens`` 0 is server-held history: noted in the report (``server_side_history_not_counted``), not
  estimated (it has no useful flat size);

and ``unreadable_content: block`` refuses every one with a 400 naming its path. The same fields sent inside
``extra_body`` (which LiteLLM merges into the provider request after the check) are found too. References
inside messages (a file or document by id or URL, ``fileData``, ``container_upload``) are each shape's
``unreadable`` parts, counted by its view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..counting.media import FILE_REFERENCE_TOKENS
from ..counting.rendered import with_extra_body

Reference = tuple[str, str, int]

CACHED = "a cached context the provider adds to the prompt: its content is not in the request"
STORED_PROMPT = "a stored prompt template filled in after the gateway's check: its text is not in the request"
MCP_SERVER = "a remote MCP server whose tool definitions the provider fetches: they are not in the request"
SKILL = "a container skill whose instructions the provider loads: they are not in the request"
STORED_ITEM = "an item stored by the provider, referenced by id: its content is not in the request"
CONTAINER_FILES = "files uploaded to the tool's container: their content is not in the request"
SERVER_HISTORY = "history the provider holds: it is not in the request"
VECTOR_STORE = ("a vector store LiteLLM searches after the gateway's check, adding the results to the prompt: they "
                "are not in the request")
CONNECTORS = ("a search the provider runs (Cohere's connectors), adding its results to the prompt: they are not in "
              "the request")
CLIENT_TEMPLATE = ("a chat template of the client's that the server renders the prompt with (vLLM, SGLang): the "
                   "prompt it makes cannot be sized")


def _present(value: Any) -> bool:
    return value is not None and value is not False and not (isinstance(value, (str, list, Mapping)) and not value)


def _fields(body: Mapping[str, Any], names: Mapping[str, str], tokens: int = FILE_REFERENCE_TOKENS) -> list[Reference]:
    """``names`` (dotted paths, each with why it cannot be sized) present in the body or its ``extra_body``."""
    found: list[Reference] = []
    for prefix, source in with_extra_body(body):
        for name, why in names.items():
            value: Any = source
            for key in name.split("."):
                value = value.get(key) if isinstance(value, Mapping) else None
            if _present(value):
                found.append((prefix + name, why, tokens))
    return found


def _tools(body: Mapping[str, Any], why: Any, path: str = "tools") -> list[Reference]:
    """``tools[i]`` for which ``why(tool)`` gives a reason (``path``: where ``body``'s ``tools`` is)."""
    tools = body.get("tools")
    found: list[Reference] = []
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        reason = why(tool) if isinstance(tool, Mapping) else None
        if reason:
            found.append((f"{path}[{index}]", reason, FILE_REFERENCE_TOKENS))
    return found


def _listed(body: Mapping[str, Any], name: str, why: str) -> list[Reference]:
    """``name[i]`` for each entry of a list field (``mcp_servers``), in the body or its ``extra_body``."""
    found: list[Reference] = []
    for prefix, source in with_extra_body(body):
        value = source.get(name)
        if isinstance(value, list):
            found += [(f"{prefix}{name}[{i}]", why, FILE_REFERENCE_TOKENS) for i, _ in enumerate(value)]
        elif _present(value):
            found.append((prefix + name, why, FILE_REFERENCE_TOKENS))
    return found


def _mcp_tool(tool: Mapping[str, Any]) -> str | None:
    kind = tool.get("type")
    return MCP_SERVER if isinstance(kind, str) and kind.startswith("mcp") else None


def _search_tool(tool: Mapping[str, Any]) -> str | None:
    """A ``file_search`` tool on chat, which has none of its own: LiteLLM takes it out and searches the stores it
    names (``vector_store_ids``) itself."""
    return VECTOR_STORE if tool.get("type") == "file_search" else _mcp_tool(tool)


def chat_references(body: Mapping[str, Any]) -> list[Reference]:
    return [*_fields(body, {"cached_content": CACHED, "cachedContent": CACHED, "prompt_id": STORED_PROMPT,
                            "chat_template": CLIENT_TEMPLATE, "chat_template_kwargs.chat_template": CLIENT_TEMPLATE,
                            "vector_store_ids": VECTOR_STORE}),
            *_listed(body, "mcp_servers", MCP_SERVER), *_tools(body, _search_tool),
            # LiteLLM forwards it to a deployment it bridges to the Responses API: the provider adds the chain it
            # holds (server-held history, counted by ``proxy.chains`` when this gateway saw it)
            *_fields(body, {"previous_response_id": SERVER_HISTORY, "conversation_id": SERVER_HISTORY}, tokens=0),
            # Cohere's own search, whose results it adds to the prompt (LiteLLM forwards a provider's parameters)
            *_fields(body, {"connectors": CONNECTORS})]


def anthropic_references(body: Mapping[str, Any]) -> list[Reference]:
    # (a stored prompt, which LiteLLM fills in after the check, is a 400: ``Shape.prompt_fields``)
    found = [*_listed(body, "mcp_servers", MCP_SERVER), *_tools(body, _mcp_tool)]
    for prefix, source in with_extra_body(body):
        container = source.get("container")
        skills = container.get("skills") if isinstance(container, Mapping) else None
        if isinstance(skills, list):
            found += [(f"{prefix}container.skills[{i}]", SKILL, FILE_REFERENCE_TOKENS) for i, _ in enumerate(skills)]
    return found


def _responses_tool(tool: Mapping[str, Any]) -> str | None:
    container = tool.get("container")
    if isinstance(container, Mapping) and _present(container.get("file_ids")):
        return CONTAINER_FILES
    return _mcp_tool(tool)


def responses_item_type(item: Mapping[str, Any]) -> Any:
    """A Responses input item's ``type``; when it is absent or null, ``message`` or, for an ``id`` without a
    ``role``, ``item_reference`` (whose ``type`` is optional: ``{"id": "msg_..."}``)."""
    kind = item.get("type")
    if kind is None:
        return "message" if "role" in item or "id" not in item else "item_reference"
    return kind


def responses_references(body: Mapping[str, Any]) -> list[Reference]:
    found = [*_fields(body, {"prompt": STORED_PROMPT, "prompt_id": STORED_PROMPT, "vector_store_ids": VECTOR_STORE}),
             *_tools(body, _responses_tool)]
    items = body.get("input")
    for index, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, Mapping) and responses_item_type(item) == "item_reference":
            found.append((f"input[{index}]", STORED_ITEM, FILE_REFERENCE_TOKENS))
        elif isinstance(item, Mapping) and item.get("type") == "additional_tools":  # tools added mid-history
            found += _tools(item, _responses_tool, f"input[{index}].tools")
    return found + _fields(body, {"previous_response_id": SERVER_HISTORY, "conversation": SERVER_HISTORY}, tokens=0)


def gemini_references(body: Mapping[str, Any]) -> list[Reference]:
    return _fields(body, {"cachedContent": CACHED, "cached_content": CACHED, "config.cachedContent": CACHED,
                          "config.cached_content": CACHED})
