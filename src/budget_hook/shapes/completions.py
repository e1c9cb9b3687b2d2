"""The ``/completions`` shape: a prompt, or a batch of prompts, each its own request to the model.

Each prompt must fit window - output reserve - margin, like a chat request. A prompt over it is blocked,
naming which prompt and by how much; nothing is truncated. A list of prompts is a batch only at the
text-completion endpoints: LiteLLM sends it to any other provider as the user messages of one chat call, so
for a group with such a deployment (``ModelLimits.joins_prompts``) the prompts must fit together too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..budget import OUTPUT_TOKEN_FIELDS
from ..counting.rendered import with_extra_body
from .base import InputsShape

#: the fewest bytes a row of ``prompt_embeds`` takes (one prompt token: the model's hidden size, 512 or more, at one
#: byte a value or more): a tensor's size over this bounds its tokens, whatever the model
EMBEDS_ROW_BYTES = 512


def _detect(body: Mapping[str, Any]) -> bool:
    return "prompt" in body and "messages" not in body


def _embeds(body: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """``prompt_embeds`` (vLLM's ``/v1/completions``, forwarded by LiteLLM as sent): base64 tensors the server reads in
    place of the prompt, each row a prompt token, which the gateway cannot read as text; priced at the most rows their
    size holds (``EMBEDS_ROW_BYTES``; a fourteenth attack review's were counted as nothing)."""
    found = []
    for prefix, source in with_extra_body(body):
        value = source.get("prompt_embeds")
        if value is None:
            continue
        tensors = value if isinstance(value, list) else [value]
        rows = max((math.ceil(len(t) * 3 / 4 / EMBEDS_ROW_BYTES) if isinstance(t, str) else
                    math.ceil(len(str(t)) / EMBEDS_ROW_BYTES) for t in tensors), default=0)
        found.append((f"{prefix}prompt_embeds", "prompt embeddings (tensors the server reads as prompt tokens): "
                      "their tokens are not in the request as text", max(1, rows)))
    return found


SHAPE = InputsShape(
    name="completions",
    call_types=frozenset({"atext_completion", "text_completion"}),
    routes=("/completions", "/v1/completions"),
    metadata_key="metadata",
    output_token_fields=OUTPUT_TOKEN_FIELDS,
    content_fields=("prompt", "suffix"),
    param="prompt",
    output_param="max_tokens",
    detect=_detect,
    field="prompt",
    reserves_output=True,
    shared_fields=("suffix",),
    # litellm.text_completion hands prompt_id to completion(), which fills the stored prompt in after both hooks
    prompt_fields=("prompt_id",),
    references=_embeds,
)
