"""The ``/embeddings`` shape: each input must fit the embedding model's input limit (no output).

An input over the limit is blocked, naming it, unless the policy's ``truncate_embedding_inputs`` asks to
cut it to the limit (reported): a silently truncated embedding is a wrong embedding nobody notices.
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
    token_ids = isinstance(value, list) and bool(value) and all(isinstance(v, (int, list)) for v in value)
    # A string or list of strings is also valid /v1/responses input: only an embedding model or token ids
    # (or the embeddings-only encoding_format / dimensions fields) say embeddings.
    return "embed" in model or token_ids or "encoding_format" in body or "dimensions" in body


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
)
