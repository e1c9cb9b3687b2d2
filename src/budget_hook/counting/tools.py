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
                found.append(with_examples(function, tool))
            else:  # a non-function tool (web search, MCP, ...): its JSON is what reaches the prompt
                found.append({"name": str(tool.get("type", "tool")), "description": canonical_json(tool)})
    elif tools is not None:
        raise MalformedRequestError("tools", f"expected a list, got {type(tools).__name__}")
    functions = request.get("functions")
    if isinstance(functions, list):
        found.extend(f for f in functions if isinstance(f, Mapping))
    search = request.get("web_search_options")
    if isinstance(search, Mapping):  # LiteLLM sends it to Claude as a web search tool, with its location
        found.append({"name": "web_search", "description": canonical_json(search)})
    return found


def beside(tool: Mapping[str, Any], used: frozenset[str]) -> dict[str, Any]:
    """A client's tool object's keys a view's function tool was not built from (``used``): kept beside its
    ``function``, where a self-hosted server's template gets them (``sent_tools``); OpenAI's rendering reads none."""
    return {str(k): v for k, v in tool.items() if k not in used and k not in ("type", "function")}


def with_examples(function: Mapping[str, Any], tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """``function`` with the tool's ``input_examples`` beside it, where LiteLLM reads them too (its Claude mapping
    sends ``tools[i].input_examples`` with the tool, and Anthropic bills them: 14,057 tokens received, 652 counted,
    a tenth attack review), under a name of their own when the function has its own."""
    examples = tool.get("input_examples") if tool is not function else None
    if examples is None:
        return function
    return {**function, "input_examples" if "input_examples" not in function else "tool_input_examples": examples}


def choice_tokens(request: Mapping[str, Any], forced: int, count: Callable[[str], int]) -> int:
    """What ``tool_choice`` (or legacy ``function_call``) adds to the prompt; ``forced``: a forced choice's overhead."""
    if request.get("tools"):
        choice = request.get("tool_choice")
        if isinstance(choice, Mapping):
            function = choice.get("function")
            name = function.get("name") if isinstance(function, Mapping) else None
            return forced + (7 + count(name) if isinstance(name, str) else 1)
        if choice == "required":
            return forced + 1
        return 1 if choice == "none" else 0
    if request.get("functions"):
        choice = request.get("function_call")
        if isinstance(choice, Mapping) and isinstance(choice.get("name"), str):
            return 4 + count(choice["name"])
        return 1 if choice == "none" else 0
    return 0


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
    if isinstance(kind, list):  # ["string", "null"]; each type once (["object", "object"] nested 20 deep would render
        # the properties 2^20 times: an attack review held the event loop 12 s with a 1,258-byte body)
        kinds = dict.fromkeys(k if isinstance(k, str) else None for k in kind)
        return " | ".join(_render_type({**prop, "type": k}, indent) for k in kinds)
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



def unrendered_text(functions: Iterable[Mapping[str, Any]], *, newer: bool = True) -> str:
    """What the cookbook rendering leaves out: every ``default`` (``schema_defaults``), and, in ``newer`` models'
    prompts (measured: requests with such schemas are billed 30-70 tokens more), descriptions nested two levels deep
    or more and ``$defs`` / ``definitions`` (the rendering cannot follow a ``$ref``)."""
    found: list[str] = [defaults] if (defaults := schema_defaults(functions)) else []
    if not newer:
        return found[0] if found else ""

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


def schema_defaults(functions: Iterable[Mapping[str, Any]]) -> str:
    """Every ``default`` in the functions' parameter schemas, as JSON, wherever it stands (a property, an array's items,
    a variant, the parameters themselves): OpenAI's harmony format writes a parameter's default beside it (``//
    default: ...``), and templates that write the schema as JSON write them all. An eleventh attack review: a default
    of 27,000 tokens counted as 84."""
    found: list[str] = []

    def walk(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                walk(item)
        elif isinstance(schema, Mapping):
            if "default" in schema:
                found.append(json.dumps(schema["default"], ensure_ascii=False, default=str))
            for key, value in schema.items():
                if key == "properties" and isinstance(value, Mapping):
                    walk(list(value.values()))
                elif key != "default" and isinstance(value, Mapping | list):
                    walk(value)

    for function in functions:
        walk(function.get("parameters"))
    return "\n".join(found)


def tool_json(function: Mapping[str, Any], style: str = "compact") -> str:
    """A function's schema as a chat template writes it: ``compact`` (what Anthropic's and Gemini's terms were
    fitted on), ``spaced`` (``tojson`` / ``json.dumps`` defaults, the whole ``{"type": "function", ...}`` tool:
    Qwen, Mistral, DeepSeek) or ``indent4`` (Llama 3.1's ``tojson(indent=4)``)."""
    if style == "compact":
        return canonical_json(function)
    tool = {"type": "function", "function": function}
    return json.dumps(tool, ensure_ascii=False, indent=4 if style == "indent4" else None, default=str)


def sent_tools(request: Mapping[str, Any]) -> list[Any]:
    """The tool definitions as a self-hosted server hands them to its chat template: each ``tools`` object whole,
    every key kept (vLLM's ``tool.model_dump()``: its models allow extra keys, and ``parameters`` is any dict), a
    legacy function wrapped as a tool, ``web_search_options`` as sent. A template that writes tools with ``tojson``
    writes all of it: a fourteenth attack review put 18,000 tokens in a parameter's ``title`` (and in ``examples``,
    ``pattern``, an ``x-`` key, a key beside ``function``), which OpenAI's rendering leaves out, and counted 71."""
    tools = request.get("tools")
    found: list[Any] = list(tools) if isinstance(tools, list) else []
    functions = request.get("functions")
    found += [{"type": "function", "function": f} for f in functions if isinstance(f, Mapping)] \
        if isinstance(functions, list) else []
    search = request.get("web_search_options")
    return found + [search] if isinstance(search, Mapping) else found


def whole_json(tool: Any, style: str = "spaced") -> str:
    """A tool object as ``tojson`` writes it, whole (``spaced``; ``indent4`` for Llama 3.1's ``tojson(indent=4)``)."""
    return json.dumps(tool, ensure_ascii=False, indent=4 if style == "indent4" else None, default=str)


#: what LiteLLM's ``unpack_defs`` does with a schema's ``$ref``s (Gemini's and Vertex AI's tools and response
#: schemas, Bedrock's tools; Anthropic's legacy ``definitions``, ``components.schemas`` and ``output_format``): it
#: walks every node, and replaces each ``{"$ref": ".../Name"}`` by a copy of the definition named by the last path
#: segment, looked up in the nearest scope (``$defs`` and ``definitions`` met on the way, the definition's own
#: included), except a name already being inlined on that path (a cycle stops there)
_SCOPES = ("$defs", "definitions")
#: an inlined count past this is over any window (2^40 tokens); so is a schema whose copies hold more than
#: ``MAX_STEPS`` objects and entries (each object and list, each of its entries, each definition a scope copies: the
#: walk's work; an attack review found 3,000 objects of 320 entries each, 55-118 ms), or whose references nest
#: deeper than ``MAX_CHAIN``: no real schema comes near either
INLINED_CAP = 1 << 40
MAX_STEPS = 30_000
#: the same for all of a request's tools together (its response schemas another): ~120 ms of the pool at most, where
#: 128 tools of a pydantic model with 15 references (438 steps each) take 56,000
REQUEST_STEPS = 8 * MAX_STEPS
MAX_CHAIN = 64
Scope = tuple[Mapping[str, Any], "Scope | None"] | None


def _local(node: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in _SCOPES:
        block = node.get(key)
        if isinstance(block, Mapping):
            found.update((str(k), v) for k, v in block.items())
    return found


def _lookup(scope: Scope, name: str) -> Any:
    while scope is not None:
        if name in scope[0]:
            return scope[0][name]
        scope = scope[1]
    return None


def inlined_tokens(schemas: Any, count: Callable[[str], int]) -> int:
    """The tokens a schema, or a list of them (a request's tools), gains when LiteLLM inlines its ``$ref``s
    (``_SCOPES``), beyond the schema as written,
    which holds each definition once: 0 for a schema that references each definition once, as pydantic writes them.
    The walk follows LiteLLM's, path by path, adding each inlined definition's own count, never building the
    copies: 40 references to one 150-word definition reached Gemini and Claude deployments as 18,700 tokens where
    the schema counted 1,200-2,200. Iterative, and bounded (``MAX_STEPS``, ``MAX_CHAIN``): past a bound, or past
    ``INLINED_CAP``, the answer is ``INLINED_CAP``, which no window admits. The schemas of one list also share a
    bound (``REQUEST_STEPS``): six tools of 5 KB, each just under ``MAX_STEPS``, took 78 ms (such a body is now decided
    in the pool: ``offload.REF_WEIGHT``), and a thousand of them would take seconds."""
    total = 0
    steps = [REQUEST_STEPS]  # what is left of the bound, for the whole list
    for schema in schemas if isinstance(schemas, list) else [schemas]:
        total += _inlined(schema, count, steps)
        if total >= INLINED_CAP:
            return INLINED_CAP
    return total


def _inlined(schema: Any, count: Callable[[str], int], left: list[int]) -> int:
    """``inlined_tokens`` of one schema, its walk's work taken from ``left``."""
    if isinstance(schema, Mapping) and set(schema) <= {"name", "description", "strict", "schema"}:
        schema = schema.get("schema")  # a response format's ``json_schema``: the schema is inside
    if isinstance(schema, list):  # several (Gemini's two schema fields)
        return min(INLINED_CAP, sum(_inlined(each, count, left) for each in schema if isinstance(each, Mapping)))
    if not isinstance(schema, Mapping) or '"$ref"' not in canonical_json(schema):
        return 0  # nothing is inlined (the usual schema: its definitions are never counted here)
    components = schema.get("components")
    legacy = components.get("schemas") if isinstance(components, Mapping) else None
    root: dict[str, Any] = {str(k): v for k, v in legacy.items()} if isinstance(legacy, Mapping) else {}
    root.update(_local(schema))
    owned: dict[int, tuple[int, bool, dict[str, Any]]] = {}  # a definition's count, references, own scope

    def own(target: Any) -> tuple[int, bool, dict[str, Any]]:
        if id(target) not in owned:
            text = canonical_json(target)
            owned[id(target)] = (count(text), '"$ref"' in text, _local(target) if isinstance(target, Mapping) else {})
        return owned[id(target)]
    written = sum(own(body)[0] for body in root.values())
    # the definitions blocks go with the schema (Anthropic keeps ``$defs`` beside legacy ones, Gemini keeps
    # ``definitions``), each reference in them inlined in place; a lone ``$defs`` is popped (Gemini) or kept as is
    skipped = () if "definitions" in schema or legacy is not None else ("$defs",)
    # the schema itself first (a schema may be a reference), less the blocks LiteLLM does not send
    stack: list[tuple[Any, Scope, frozenset[str]]] = [
        ({k: v for k, v in schema.items() if k not in skipped}, (root, None), frozenset())]
    total, mine = 0, left[0] - MAX_STEPS  # this schema may take MAX_STEPS of what is left
    while stack:
        node, scope, chain = stack.pop()
        if chain:  # inside a copy: the work that grows with the inlining
            left[0] -= 1 + len(node)
            if left[0] < max(0, mine) or total > INLINED_CAP:
                return INLINED_CAP
        if isinstance(node, list):
            stack.extend((item, scope, chain) for item in node if isinstance(item, (Mapping, list)))
        else:
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.split("/")[-1]
                target = None if name in chain else _lookup(scope, name)
                if target is not None:
                    if len(chain) >= MAX_CHAIN:
                        return INLINED_CAP
                    tokens, refers, inner = own(target)
                    total += tokens
                    if refers:  # a copy with references of its own is walked for them
                        stack.append((target, (inner, scope) if inner else scope, chain | {name}))
                continue
            inner = _local(node)
            left[0] -= len(inner) if chain else 0
            if left[0] < max(0, mine):
                return INLINED_CAP
            below: Scope = (inner, scope) if inner else scope
            stack.extend((value, below, chain) for value in node.values() if isinstance(value, (Mapping, list)))
    return min(INLINED_CAP, max(0, total - written))


def response_schemas(response_format: Any) -> list[Any]:
    """The schemas of a chat ``response_format`` that reach the prompt: ``json_schema`` and ``response_schema``,
    whatever the type (LiteLLM reads ``response_schema`` first, even beside type ``text``, and turns either into a
    forced tool or an ``output_format`` for Anthropic and Bedrock, a ``responseJsonSchema`` for Gemini, a user
    text for a model without schema support: a review found ``json_object`` and ``text`` formats sending them)."""
    if not isinstance(response_format, Mapping):
        return []
    return [response_format[key] for key in ("json_schema", "response_schema") if response_format.get(key) is not None]
