"""Tool definitions as OpenAI renders them into the prompt (a TypeScript-like ``namespace functions``).

Contract: ``tool_functions(request)`` extracts the function definitions of a chat request's ``tools``
(type function; other tools as their JSON) or legacy ``functions``, raising ``MalformedRequestError``
for a ``tools`` value of the wrong type. ``render_functions(functions)`` returns the text OpenAI puts
in the prompt; it reproduces the API's billed counts for the cookbook and hmarr/openai-chat-tokens cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import MalformedRequestError
from .canonical import canonical_json


def tool_functions(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The function definitions of ``tools`` (type function) or legacy ``functions``."""
    found: list[Mapping[str, Any]] = []
    tools = request.get("tools")
    if isinstance(tools, list):
        for index, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise MalformedRequestError(f"tools[{index}]", "expected an object")
            function = tool.get("function")
            if isinstance(function, Mapping):
                found.append(function)
            else:  # a non-function tool (web search, MCP, ...): its JSON is what reaches the prompt
                found.append({"name": str(tool.get("type", "tool")), "description": canonical_json(tool)})
    elif tools is not None:
        raise MalformedRequestError("tools", f"expected a list, got {type(tools).__name__}")
    functions = request.get("functions")
    if isinstance(functions, list):
        found.extend(f for f in functions if isinstance(f, Mapping))
    return found


def render_functions(functions: Iterable[Mapping[str, Any]]) -> str:
    """Render function schemas the way OpenAI puts them in the prompt (TypeScript-like namespace).

    Reproduces the OpenAI API's billed counts for the cookbook and hmarr/openai-chat-tokens cases.
    Properties nested two levels deep lose their descriptions, as the API does.
    """
    lines = ["namespace functions {", ""]
    for function in functions:
        description = function.get("description")
        if isinstance(description, str) and description:
            lines.append(f"// {description}")
        parameters = function.get("parameters")
        name = function.get("name", "")
        if isinstance(parameters, Mapping) and parameters.get("properties"):
            lines.append(f"type {name} = (_: {{")
            lines.append(_render_properties(parameters, 0))
            lines.append("}) => any;")
        else:
            lines.append(f"type {name} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _render_properties(schema: Mapping[str, Any], indent: int) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    listed = schema.get("required")
    required: list[Any] = listed if isinstance(listed, list) else []
    lines = []
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            prop = {}
        description = prop.get("description")
        if isinstance(description, str) and description and indent < 2:
            lines.append(f"// {description}")
        optional = "" if name in required else "?"
        lines.append(f"{name}{optional}: {_render_type(prop, indent)},")
    return "\n".join(" " * indent + line for line in lines)


def _render_type(prop: Mapping[str, Any], indent: int) -> str:
    variants = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(variants, list) and variants:
        return " | ".join(_render_type(v if isinstance(v, Mapping) else {}, indent) for v in variants)
    if "const" in prop:
        return json.dumps(prop["const"], ensure_ascii=False)
    kind = prop.get("type")
    enum = prop.get("enum")
    if isinstance(kind, list):  # ["string", "null"]
        return " | ".join(_render_type({**prop, "type": k}, indent) for k in kind)
    if kind == "string":
        return " | ".join(f'"{v}"' for v in enum) if isinstance(enum, list) else "string"
    if kind in ("number", "integer"):
        return " | ".join(str(v) for v in enum) if isinstance(enum, list) else "number"
    if kind in ("boolean", "null"):
        return str(kind)
    if kind == "object":
        return "\n".join(["{", _render_properties(prop, indent + 2), "}"])
    if kind == "array":
        items = prop.get("items")
        return f"{_render_type(items, indent)}[]" if isinstance(items, Mapping) else "any[]"
    return "any"



def unrendered_text(functions: Iterable[Mapping[str, Any]]) -> str:
    """What the cookbook rendering leaves out but newer models' prompts carry (measured: requests with such
    schemas are billed 30-70 tokens more): descriptions nested two levels deep or more, and ``$defs`` /
    ``definitions`` (the rendering cannot follow a ``$ref``)."""
    found: list[str] = []

    def walk(schema: Any, depth: int) -> None:
        if isinstance(schema, list):
            for item in schema:
                walk(item, depth)
            return
        if not isinstance(schema, Mapping):
            return
        for key, value in schema.items():
            if key == "properties" and isinstance(value, Mapping):
                for prop in value.values():
                    if isinstance(prop, Mapping) and isinstance(prop.get("description"), str) and depth >= 2:
                        found.append(prop["description"])
                    walk(prop, depth + 1)
            elif key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties"):
                walk(value, depth)
            elif key in ("$defs", "definitions") and isinstance(value, Mapping):
                found.append(canonical_json(value))

    for function in functions:
        walk(function.get("parameters"), 1)
    return "\n".join(found)


def tool_json(function: Mapping[str, Any], style: str = "compact") -> str:
    """A function's schema as a chat template writes it: ``compact`` (what Anthropic's and Gemini's terms were
    fitted on), ``spaced`` (``tojson`` / ``json.dumps`` defaults, the whole ``{"type": "function", ...}`` tool:
    Qwen, Mistral, DeepSeek) or ``indent4`` (Llama 3.1's ``tojson(indent=4)``)."""
    if style == "compact":
        return canonical_json(function)
    tool = {"type": "function", "function": function}
    return json.dumps(tool, ensure_ascii=False, indent=4 if style == "indent4" else None, default=str)


#: a ``$ref`` LiteLLM inlines, and where it looks the name up: ``unpack_defs`` (Gemini's and Vertex AI's tools and
#: response schemas, Bedrock's tools), ``unpack_legacy_defs`` (Anthropic's ``definitions`` and OpenAPI
#: ``components.schemas``), Anthropic's ``output_format``; each reference becomes a copy of its definition
_REF_PREFIXES = ("#/$defs/", "#/definitions/", "#/components/schemas/")
#: a schema's keys whose values are named sub-schemas (property names, not keywords: a property may be called
#: ``definitions``)
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "schemas")
#: an inlined count past this is over any window: the sum stops growing there (2^40 tokens)
INLINED_CAP = 1 << 40


def _ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    if isinstance(ref, str):
        for prefix in _REF_PREFIXES:
            if ref.startswith(prefix):
                return ref[len(prefix):]
    return None


def _walk(schema: Any) -> tuple[dict[str, Any], list[str]]:
    """The definitions anywhere in ``schema`` (by name, as LiteLLM merges ``$defs`` and ``definitions``) and the
    names referenced outside them. Iterative: a client's schema never reaches Python's recursion limit."""
    definitions: dict[str, Any] = {}
    references: list[str] = []
    stack: list[tuple[Any, bool]] = [(schema, False)]  # (node, whether its values are named sub-schemas)
    while stack:
        node, named = stack.pop()
        if isinstance(node, list):
            stack.extend((item, False) for item in node)
        elif isinstance(node, Mapping):
            if named:
                stack.extend((value, False) for value in node.values())
                continue
            name = _ref_name(node)
            if name is not None:
                references.append(name)
            for key, value in node.items():
                if key in ("$defs", "definitions") and isinstance(value, Mapping):
                    definitions.update((str(k), v) for k, v in value.items())
                elif key == "components" and isinstance(value, Mapping) and isinstance(value.get("schemas"), Mapping):
                    definitions.update((str(k), v) for k, v in value["schemas"].items())
                else:
                    stack.append((value, key in _NAMED))
    return definitions, references


def inlined_tokens(schema: Any, count: Callable[[str], int]) -> int:
    """The tokens a schema gains when each ``$ref`` is replaced by a copy of its definition (nested references
    inlined too, a cycle's back reference left as it is, as LiteLLM does), beyond the schema as written, which holds
    each definition once: 0 for the usual schema that references each definition once. Counted from each
    definition's own count, never materialised: 40 references to one 150-word definition reached a Gemini or
    Claude deployment as 18,700 tokens where the schema counted 1,200-2,200."""
    if not isinstance(schema, (Mapping, list)):
        return 0
    definitions, references = _walk(schema)
    if not references or not definitions:
        return 0
    own = {name: count(canonical_json(body)) for name, body in definitions.items()}
    refers = {name: _walk(body)[1] if isinstance(body, (Mapping, list)) else [] for name, body in definitions.items()}
    inlined: dict[str, int] = {}
    for root in dict.fromkeys(references):  # each definition with its references inlined, depth first, no recursion
        stack, open_ = [(root, False)], set()
        while stack:
            name, done = stack.pop()
            if name in inlined or name not in definitions:
                continue
            if done:
                open_.discard(name)
                inlined[name] = min(INLINED_CAP, own[name] + sum(inlined.get(ref, 0) for ref in refers[name]))
            elif name not in open_:
                open_.add(name)
                stack.append((name, True))
                stack.extend((ref, False) for ref in refers[name] if ref not in open_ and ref not in inlined)
    written = sum(own.values())
    return min(INLINED_CAP, max(0, sum(inlined.get(name, 0) for name in references) - written))


def response_schemas(response_format: Any) -> list[Any]:
    """The schemas of a chat ``response_format`` that reach the prompt: ``json_schema``'s (type ``json_schema``), and
    ``response_schema``, which LiteLLM reads first whatever the type but ``text`` and sends as a forced tool or an
    ``output_format`` (Anthropic), a ``responseJsonSchema`` (Gemini) or a user text ("Use this JSON schema")."""
    if not isinstance(response_format, Mapping) or response_format.get("type") == "text":
        return []
    found = [response_format.get("json_schema")] if response_format.get("type") == "json_schema" else []
    return found + ([response_format["response_schema"]] if response_format.get("response_schema") is not None else [])
