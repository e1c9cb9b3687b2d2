"""The ``/completions`` shape: a prompt, or a batch of prompts, each its own request to the model.

Each prompt must fit window - output reserve - margin, like a chat request. A prompt over it is blocked,
naming which prompt and by how much; nothing is truncated. A list of prompts is a batch only at the
text-completion endpoints: LiteLLM sends it to any other provider as the user messages of one chat call, so
for a group with such a deployment (``ModelLimits.joins_prompts``) the prompts must fit together too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..budget import OUTPUT_TOKEN_FIELDS
from .base import InputsShape


def _detect(body: Mapping[str, Any]) -> bool:
    return "prompt" in body and "messages" not in body


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
)
