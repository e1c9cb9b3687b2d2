"""The ``/embeddings`` shape: each input must fit the embedding model's input limit (no output).

An input over the limit is blocked, naming it, unless the policy's ``truncate_embedding_inputs`` asks to
cut it to the limit (reported): a silently truncated embedding is a wrong embedding nobody notices. ``messages``
beside ``input`` is refused (``bounds.EMBEDDING_MESSAGES_REMEDY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import InputsShape


def _detect(body: Mapping[str, Any]) -> bool:
    if "input" not in body or "messages" in body:
        return False
    value = body.get("input")
    model = str(body.get("model") or "").lower()
    # A list of strings or of token ids is never /v1/responses input (its list holds item objects); a
    # single string can be either: then only an embedding model or an embeddings-only field says so.
    listed = isinstance(value, list) and bool(value) and all(isinstance(v, (str, int, list)) for v in value)
    return listed or "embed" in model or "encoding_format" in body or "dimensions" in body


SHAPE = InputsShape(
    name="embeddings",
    call_types=frozenset({"aembedding", "embedding"}),
    routes=("/embeddings", "/v1/embeddings"),
    metadata_key="metadata",
    output_token_fields=(),
    content_fields=("input",),
    param="input",
    output_param=None,
    detect=_detect,
    field="input",
    reserves_output=False,
    # a chat-style embedding request's messages (vLLM's ``EmbeddingChatRequest``), which LiteLLM forwards beside
    # ``input`` to an OpenAI-compatible server uncounted, and the server may embed in its place: a 400 naming it
    prompt_fields=("messages",),
)
