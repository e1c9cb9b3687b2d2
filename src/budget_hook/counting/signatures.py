"""Gemini thought signatures a chat-format request replays (LiteLLM's ``/chat/completions`` carriers).

Gemini bills a thought signature from an earlier turn as input. On ``/chat/completions`` LiteLLM sends them
back from three places (``litellm_core_utils/prompt_templates/factory.py``, ``_get_thought_signature_from_tool``
and the Gemini transformation): a tool call's ``provider_specific_fields.thought_signature`` (or its
``function``'s), the tool call id after ``__thought__`` (``call_x__thought__<signature>``), and the
message's ``provider_specific_fields.thought_signatures``. ``replayed_signatures(message)`` lists them once
each; ``signature_tokens(message, chars_per_token)`` prices them per base64 character, as the native
``thoughtSignature`` is priced (``counter``: ``thought_signature`` parts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: LiteLLM's ``THOUGHT_SIGNATURE_SEPARATOR``
SEPARATOR = "__thought__"


def _field(value: Any, key: str) -> Any:
    fields = value.get("provider_specific_fields") if isinstance(value, Mapping) else None
    return fields.get(key) if isinstance(fields, Mapping) else None


def replayed_signatures(message: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        call_id = call.get("id")
        for signature in (_field(call, "thought_signature"), _field(call.get("function"), "thought_signature"),
                          call_id.partition(SEPARATOR)[2] if isinstance(call_id, str) else None):
            if isinstance(signature, str) and signature:
                found.append(signature)
                break  # LiteLLM sends the first it finds
    listed = _field(message, "thought_signatures")
    found += [s for s in (listed if isinstance(listed, list) else [_field(message, "thought_signature")])
              if isinstance(s, str) and s]
    return list(dict.fromkeys(found))


def signature_tokens(message: Mapping[str, Any], chars_per_token: float) -> int:
    return sum(math.ceil(len(signature) / chars_per_token) for signature in replayed_signatures(message))
