"""A shape's own prompt fields (``Shape.prompt_fields``): what LiteLLM fills prompt text in for, or forwards beside the
content uncounted, on that shape's calls alone. A client's is a 400 naming it, at the top level and in a fallback
target alike (LiteLLM merges a target's fields into the fallback call): an embedding request's ``messages`` (vLLM
may embed them in place of ``input``), ``/v1/messages``' Responses-only ``instructions``, a stored ``prompt_id``."""

from __future__ import annotations

import pytest

from budget_hook.pipeline.bounds import body_problem, prompt_parameter_remedy
from budget_hook.shapes import SHAPES

BIG = [{"role": "user", "content": "word " * 3000}]
CASES = [
    ("embeddings", {"input": ["hi"], "messages": BIG}, "messages", "send the text to embed as input"),
    ("embeddings", {"input": ["hi"], "fallbacks": [{"model": "e2", "messages": BIG}]}, "fallbacks[0].messages",
     "send the text to embed as input"),
    ("anthropic", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10,
                   "fallbacks": [{"model": "gpt", "instructions": "word " * 3000}]}, "fallbacks[0].instructions",
     "send instructions as system"),
    ("completions", {"prompt": "hi", "fallbacks": [{"model": "c2", "prompt_id": "big"}]}, "fallbacks[0].prompt_id",
     None),
]


@pytest.mark.parametrize("shape, body, path, remedy", CASES, ids=[c[2] for c in CASES])
def test_a_shapes_prompt_field_is_refused_at_the_top_level_and_in_fallback_targets(shape, body, path, remedy):
    one = SHAPES.get(shape)
    problem = body_problem({"model": "g", **body}, one.content_fields, prompt_fields=one.prompt_fields)
    assert problem is not None and problem.field == path
    if remedy is not None:
        assert remedy in prompt_parameter_remedy(path)


def test_other_shapes_keep_messages_as_their_content():
    chat = SHAPES.get("chat")
    body = {"model": "g", "messages": BIG, "fallbacks": [{"model": "g2", "messages": BIG}]}
    assert body_problem(body, chat.content_fields, prompt_fields=chat.prompt_fields) is None
    embeddings = SHAPES.get("embeddings")
    assert body_problem({"model": "e", "input": ["hi"]}, embeddings.content_fields,
                        prompt_fields=embeddings.prompt_fields) is None
