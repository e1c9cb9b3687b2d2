"""Schemas LiteLLM enlarges after the count (a fifth attack review): a ``$ref`` it inlines as a copy of its definition
(Gemini's and Vertex AI's tools and response schemas, Anthropic's ``definitions`` and ``output_format``, Bedrock's
tools), and a ``response_format.response_schema``, which it reads first whatever the type and sends as a tool, an
``output_format``, a ``responseJsonSchema`` or a user text. Before: 26 tokens counted where 11,426 reached an 8k
Anthropic window; 1,229-2,159 counted where 18,700 reached Gemini and Claude deployments."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.litellm_core_utils.prompt_templates.common_utils import unpack_defs

from budget_hook.counting import TokenCounter
from budget_hook.counting.canonical import canonical_json
from budget_hook.counting.profiles import resolve_tokenizer
from budget_hook.counting.tools import INLINED_CAP, inlined_tokens, response_schemas

MODELS = ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash", "gpt-4o"]
ITEM = {"type": "object", "description": " ".join(f"word{i}" for i in range(150)),
        "properties": {"a": {"type": "string"}}}
#: one definition referenced by 40 properties: LiteLLM sends 40 copies of it
FANNED = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/Item"} for i in range(40)}, "$defs": {"Item": ITEM}}
USER = [{"role": "user", "content": "hi"}]


def counter(model: str) -> TokenCounter:
    return TokenCounter(resolve_tokenizer(model), model=model)


def item_tokens(model: str) -> int:
    return counter(model).count_text(canonical_json(ITEM))


@pytest.mark.parametrize("model", MODELS)
def test_each_reference_to_a_definition_is_counted_as_the_copy_litellm_sends(model):
    tools = [{"type": "function", "function": {"name": "f", "parameters": FANNED}}]
    assert counter(model).count_request({"messages": USER, "tools": tools}).total >= 40 * item_tokens(model)
    for response_format in ({"type": "json_schema", "json_schema": {"name": "r", "schema": FANNED}},
                            {"type": "json_object", "response_schema": FANNED}):
        assert counter(model).count_request(
            {"messages": USER, "response_format": response_format}).total >= 40 * item_tokens(model)


@pytest.mark.parametrize("model", MODELS)
def test_a_response_schema_is_counted_whatever_the_type(model):
    """LiteLLM reads ``response_schema`` first, even beside type ``text``, and a ``json_schema`` beside type
    ``json_object`` or no type (a review of the first fix: 12 tokens counted, ~8,900 sent)."""
    plain = counter(model).count_request({"messages": USER}).total
    for response_format in ({"type": "json_object", "response_schema": ITEM}, {"type": "text", "response_schema": ITEM},
                            {"type": "anything", "response_schema": ITEM}, {"response_schema": ITEM},
                            {"type": "json_object", "json_schema": {"schema": ITEM}}, {"json_schema": {"schema": ITEM}}):
        body = {"messages": USER, "response_format": response_format}
        assert counter(model).count_request(body).total >= plain + item_tokens(model), response_format


def test_which_response_format_schemas_reach_the_prompt():
    assert response_schemas({"type": "json_schema", "json_schema": {"schema": 1}}) == [{"schema": 1}]
    assert response_schemas({"type": "json_schema", "json_schema": {"schema": 1}, "response_schema": 2}) == [
        {"schema": 1}, 2]
    assert response_schemas({"type": "json_object", "response_schema": 2}) == [2]
    assert response_schemas({"type": "text", "response_schema": 2}) == [2]
    assert response_schemas({"type": "json_object"}) == [] and response_schemas({"type": "text"}) == []
    assert response_schemas("json") == [] and response_schemas(None) == []


def test_a_schema_that_references_each_definition_once_counts_as_before():
    """Pydantic's usual schema (each model referenced once, nested): the definitions are counted where they are
    written, so nothing is added and the held-out accuracy is unchanged."""
    schema = {"type": "object", "properties": {"author": {"$ref": "#/$defs/Author"}},
              "$defs": {"Author": {"type": "object", "properties": {"address": {"$ref": "#/$defs/Address"}}},
                        "Address": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    assert inlined_tokens(schema, len) == 0
    assert inlined_tokens({"type": "object", "properties": {"x": {"type": "string"}}}, len) == 0


def test_an_exponential_fan_out_is_capped_and_never_materialised():
    definitions = {f"D{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"},
                                                              "b": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(200)}
    definitions["D200"] = {"type": "string"}
    written = len(canonical_json(definitions))
    assert INLINED_CAP - written <= inlined_tokens({"$ref": "#/$defs/D0", "$defs": definitions}, len) <= INLINED_CAP


def test_cycles_and_long_chains_end_without_recursion():
    cycle = {"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}}}}
    assert inlined_tokens(cycle, len) == 0
    chain = {f"C{i}": {"$ref": f"#/$defs/C{i + 1}"} for i in range(60)}
    assert inlined_tokens({"$ref": "#/$defs/C0", "$defs": chain}, len) == 0
    deeper = {f"C{i}": {"$ref": f"#/$defs/C{i + 1}"} for i in range(20_000)}  # past MAX_CHAIN: over any window
    assert inlined_tokens({"$ref": "#/$defs/C0", "$defs": deeper}, len) == INLINED_CAP


def test_a_property_named_like_a_keyword_is_walked_as_a_property():
    schema = {"type": "object", "properties": {"definitions": {"$ref": "#/$defs/Item"},
                                               "other": {"$ref": "#/$defs/Item"}}, "$defs": {"Item": ITEM}}
    assert inlined_tokens(schema, len) == len(canonical_json(ITEM))


def fanned(ref: str, **extra) -> dict:
    return {"type": "object", "properties": {f"p{i}": {"$ref": ref} for i in range(40)}, "$defs": {"Item": ITEM}, **extra}


@pytest.mark.parametrize("ref", ["Item", "#/properties/Item", "other.json#/$defs/Item", "#/$defs/X/Item",
                                 "#/definitions/Item", "#/components/schemas/Item"])
def test_a_reference_is_looked_up_by_its_last_segment_as_litellm_does(ref):
    """LiteLLM's ``unpack_defs`` takes the last path segment of any ``$ref`` (a review of the first fix: 28x under)."""
    assert inlined_tokens(fanned(ref), len) == 39 * len(canonical_json(ITEM))


def test_the_nearest_definition_of_a_name_is_the_one_inlined():
    """A small ``Item`` in a property's own ``$defs`` hides the large top-level one there, and a ``$defs`` inside a
    definition is in scope in its copies (a review of the first fix: 23x under each)."""
    small = {"type": "string"}
    shadowed = {"type": "object", "$defs": {"Item": ITEM}, "properties": {
        "near": {"type": "object", "$defs": {"Item": small}, "properties": {"x": {"$ref": "#/$defs/Item"}}},
        **{f"far{i}": {"$ref": "#/$defs/Item"} for i in range(40)}}}
    assert inlined_tokens(shadowed, len) >= 39 * len(canonical_json(ITEM))
    nested = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/Outer"} for i in range(40)},
              "$defs": {"Outer": {"type": "object", "$defs": {"Inner": ITEM},
                                  "properties": {"x": {"$ref": "#/$defs/Inner"}}}}}
    assert inlined_tokens(nested, len) >= 40 * len(canonical_json(ITEM))


def test_a_cycle_is_followed_path_by_path_as_litellm_does():
    """LiteLLM stops a cycle per path, so a definition in a cycle expands differently where the walk entered it:
    one value per name under-counted 12x (a review of the first fix)."""
    schema = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/X"} for i in range(40)}, "$defs": {
        "X": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        "A": {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"},
                                               **{f"b{j}": {"$ref": "#/$defs/Item"} for j in range(20)}}},
        "Item": ITEM}}
    assert len(canonical_json(schema)) + inlined_tokens(schema, len) >= len(canonical_json(litellm_inlined(schema)))


def test_legacy_definitions_blocks_are_counted_as_sent_with_their_references_inlined():
    """With a ``definitions`` block, Anthropic's tools keep ``$defs`` and inline references inside it too, and
    Gemini keeps ``definitions`` (a review of the first fix: 14x under)."""
    chain = {f"D{i}": {"type": "object", "description": "d" * 40, "properties": {
        "a": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(30)}
    chain["D30"] = ITEM
    schema = {"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": chain, "definitions": {}}
    inlined = copy.deepcopy(schema)
    unpack_defs(inlined, {})  # in place, the $defs block included, as the legacy path does
    assert len(canonical_json(schema)) + inlined_tokens(schema, len) >= len(canonical_json(inlined))


def test_gemini_counts_every_response_schema_it_is_given():
    """``responseSchema`` and ``responseJsonSchema`` together: LiteLLM keeps the one its model takes (a review of
    the first fix: the first was counted, 12 tokens, and the other sent, 8,911)."""
    from budget_hook.shapes import SHAPES
    gemini = SHAPES.get("gemini")
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "word " * 20}
                                            for i in range(100)}}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"responseSchema": {"type": "string"}, "responseJsonSchema": big}}
    alone = {"contents": body["contents"], "generationConfig": {"responseJsonSchema": big}}
    model = "gemini/gemini-2.5-flash"
    assert counter(model).count_request(gemini.view(body).request).total >= \
        counter(model).count_request(gemini.view(alone).request).total


def litellm_inlined(schema: dict) -> dict:
    inlined = copy.deepcopy(schema)
    unpack_defs(inlined, inlined.pop("$defs", {}))
    return inlined


NAMES = [f"N{i}" for i in range(6)]


@st.composite
def schemas(draw):
    """A schema whose definitions reference later ones only, or any (cycles, which LiteLLM stops path by path),
    the root referencing any; each definition a few properties, some of them references."""
    def node(allowed):
        if allowed and draw(st.booleans()):
            return {"$ref": f"#/$defs/{draw(st.sampled_from(allowed))}"}
        return {"type": "string", "description": draw(st.text("abc xyz", max_size=30))}
    definitions = {}
    cyclic = draw(st.booleans())
    for index, name in enumerate(NAMES):
        later = NAMES if cyclic else NAMES[index + 1:]
        definitions[name] = {"type": "object", "properties": {
            f"f{k}": node(later) for k in range(draw(st.integers(0, 3)))}}
    return {"type": "object", "properties": {f"r{k}": node(NAMES) for k in range(draw(st.integers(0, 6)))},
            "$defs": definitions}


@settings(max_examples=200, deadline=None)
@given(schemas())
def test_the_count_covers_the_schema_litellm_inlines(schema):
    """Measured in characters of canonical JSON: the schema as written plus what inlining adds is never less than
    the schema LiteLLM's own ``unpack_defs`` produces (which drops the definitions block)."""
    inlined = litellm_inlined(schema)
    assert len(canonical_json(schema)) + inlined_tokens(schema, len) >= len(canonical_json(inlined))
