"""Tool definitions on a self-hosted deployment (a fourteenth attack review, F1 and F2): the server renders tools
through a chat template, which vLLM hands each tool's ``model_dump()`` (every key the client sent: its models allow
extra keys, ``parameters`` is any dict), and most templates write them with ``tojson``. Every string anywhere in a
tool definition is counted, at least its own tokens, for a family rendered through a template or not recognised;
OpenAI's own models keep OpenAI's rendering (which bills none of those keys)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter, templated
from budget_hook.counting.templated import TokenizerSpec
from budget_hook.shapes import SHAPES

from .test_configured_tokenizer import expected, files  # noqa: F401 (a fixture)

#: a string written between JSON quotes may share a token with each of them: its own tokens, less these two
EDGES = 2
STUFFING = " ".join(f"r15m{index % 89} lorem" for index in range(600))  # ~3,600 o200k tokens
SELF_HOSTED = ("hosted_vllm/my-model", "openai/my-model", "ollama/my-model", "hosted_vllm/Qwen/Qwen2.5-7B-Instruct",
               "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", "hosted_vllm/deepseek-ai/DeepSeek-V3",
               "hosted_vllm/mistralai/Mistral-7B-Instruct-v0.3", "hosted_vllm/google/gemma-3-27b-it")
OPENAI_OWN = ("gpt-4o", "openai/gpt-4.1-mini", "azure/my-deployment", "openai/ft:gpt-4o-mini-2024-07-18:org::abc")


def tool(param: dict[str, Any] | None = None, function: dict[str, Any] | None = None,
         outer: dict[str, Any] | None = None) -> dict[str, Any]:
    prop = {"type": "string", "description": "the query", **(param or {})}
    fn = {"name": "search", "description": "Search the code.", **(function or {}),
          "parameters": {"type": "object", "properties": {"query": prop}, "required": ["query"]}}
    return {"type": "function", "function": fn, **(outer or {})}


def nested(where: str, text: str) -> dict[str, Any]:
    """A tool whose parameter schema holds ``text`` under ``items``, ``anyOf`` or ``additionalProperties``."""
    prop: dict[str, Any] = {"type": "array", "items": {"type": "string", "description": text}} if where == "items" \
        else {"anyOf": [{"type": "string", "description": text}, {"type": "null"}]} if where == "anyOf" \
        else {"type": "object", "additionalProperties": {"type": "string", "description": text}}
    return {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": prop}}}}


PLACES = {
    "param title": lambda s: tool(param={"title": s}),
    "param examples": lambda s: tool(param={"examples": [s]}),
    "param pattern": lambda s: tool(param={"pattern": s}),
    "param format": lambda s: tool(param={"format": s}),
    "param x- key": lambda s: tool(param={"x-doc": s}),
    "param $comment": lambda s: tool(param={"$comment": s}),
    "items description": lambda s: nested("items", s),
    "anyOf description": lambda s: nested("anyOf", s),
    "additionalProperties description": lambda s: nested("additionalProperties", s),
    "function extra key": lambda s: tool(function={"examples": s}),
    "tool extra key": lambda s: tool(outer={"description": s}),
    "tool x- key": lambda s: tool(outer={"x-doc": s}),
}


def chat(one: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "find the bug"}], "tools": [one]}


def tools_total(model: str, body: dict[str, Any], shape: str = "chat") -> int:
    return SHAPES.get(shape).count(body, TokenCounter.for_model(model))


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("model", SELF_HOSTED)
def test_every_string_of_a_tool_is_counted_for_a_self_hosted_model(model, place):
    # the review: 18,000 tokens in a title, 71 counted on hosted_vllm/my-model; Qwen 195 and Llama 228 with the text
    # in a key beside ``function``; now at least the text's own tokens more than the same tool without it
    counter = TokenCounter.for_model(model)
    small = tools_total(model, chat(PLACES[place]("")))
    big = tools_total(model, chat(PLACES[place](STUFFING)))
    assert big - small >= counter.count_text(STUFFING) - EDGES, (model, place, small, big)


@pytest.mark.parametrize("model", OPENAI_OWN)
def test_openai_own_models_keep_openai_rendering(model):
    # OpenAI bills none of these keys: counting them would refuse legitimate requests to gpt-4o or an Azure deployment
    plain = tools_total(model, chat(tool()))
    assert tools_total(model, chat(tool(param={"title": STUFFING}, outer={"x-doc": STUFFING}))) == plain


def test_a_responses_tool_key_beside_the_function_is_counted():
    # the review: /v1/responses to Qwen with a tool key ``x-doc`` (LiteLLM's bridge forwards it to the server)
    model = "hosted_vllm/Qwen/Qwen2.5-7B-Instruct"

    def body(text: str) -> dict[str, Any]:
        return {"model": "m", "input": "q", "tools": [
            {"type": "function", "name": "search", "parameters": {"type": "object"}, "x-doc": text}]}
    gained = tools_total(model, body(STUFFING), "responses") - tools_total(model, body(""), "responses")
    assert gained >= TokenCounter.for_model(model).count_text(STUFFING) - EDGES


def test_a_messages_tool_key_beside_the_schema_is_counted():
    model = "hosted_vllm/my-model"

    def body(text: str) -> dict[str, Any]:
        return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "q"}], "tools": [
            {"name": "search", "description": "d", "input_schema": {"type": "object"}, "x-doc": text}]}
    gained = tools_total(model, body(STUFFING), "anthropic") - tools_total(model, body(""), "anthropic")
    assert gained >= TokenCounter.for_model(model).count_text(STUFFING) - EDGES


def test_a_configured_template_is_handed_every_key_of_a_tool(files):  # noqa: F811 (the fixture)
    model = "hosted_vllm/org/tiny-llama"
    templated.configure([TokenizerSpec(model, str(files[0]), str(files[1]))])
    try:
        stuffed = [tool(param={"title": "a b c " * 50}, outer={"x-doc": "d e f " * 50})]
        messages = [{"role": "user", "content": "find the bug"}]
        counted = TokenCounter.for_model(model).count_request({"messages": messages, "tools": stuffed})
        assert counted.total == expected(files, messages, stuffed)
    finally:
        templated.configure([])


# --- the property: any string anywhere in a tool definition ------------------------------------------------------

WORDS = st.lists(st.sampled_from(["lorem", "ipsum", "query", "path", "Zeta", "42", "x9", "tab", "données"]),
                 min_size=1, max_size=40).map(" ".join)
KEYS = st.sampled_from(["title", "examples", "pattern", "format", "x-doc", "$comment", "description", "default",
                        "const", "enum", "note", "extra"])
SCHEMA = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "number", "boolean"])}),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"type": st.just("array"), "items": inner}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"type": st.just("object"),
                               "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)}),
        st.fixed_dictionaries({"type": st.just("object"), "additionalProperties": inner})),
    max_leaves=8)


def _objects(value: Any) -> list[dict[str, Any]]:
    """Every object inside ``value``, itself included, depth first."""
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(SELF_HOSTED), schema=SCHEMA, key=KEYS, text=WORDS, where=st.integers(0, 1000),
       as_list=st.booleans())
def test_any_string_anywhere_in_a_tool_raises_the_count_by_its_tokens(model, schema, key, text, where, as_list):
    base = {"type": "function", "function": {"name": "search", "description": "Search.",
                                             "parameters": {"type": "object", "properties": {"q": schema}}}}
    stuffed = copy.deepcopy(base)
    holders = _objects(stuffed)
    holder = holders[where % len(holders)]
    name = key if key not in holder else f"{key}_"
    holder[name] = [text] if as_list else text
    counter = TokenCounter.for_model(model)
    before = tools_total(model, chat(base))
    after = tools_total(model, chat(stuffed))
    assert after - before >= counter.count_text(text) - EDGES, (json.dumps(stuffed), before, after)


def test_a_gemini_declaration_key_beside_its_schema_is_counted():
    # generateContent to a self-hosted model (LiteLLM 1.108's Gemini route): a declaration's other keys reach it too
    model = "hosted_vllm/my-model"

    def body(text: str) -> dict[str, Any]:
        return {"contents": [{"role": "user", "parts": [{"text": "q"}]}], "tools": [{"functionDeclarations": [
            {"name": "search", "description": "d", "parameters": {"type": "object"}, "x-doc": text}]}]}
    gained = tools_total(model, body(STUFFING), "gemini") - tools_total(model, body(""), "gemini")
    assert gained >= TokenCounter.for_model(model).count_text(STUFFING) - EDGES
