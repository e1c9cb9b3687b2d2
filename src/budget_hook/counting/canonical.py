"""Deterministic JSON: what unknown structures are counted as, and what content hashes are taken over; and the
count-cache key of plain tool calls, which needs no JSON."""

from __future__ import annotations

import json
from typing import Any

#: one encoder for every call (``json.dumps`` with these arguments builds a new one each time: a third of its
#: cost on the small structures hashed per message); ``encode`` keeps no state between calls
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical_json(value: Any) -> str:
    """Deterministic JSON used for hashing and for counting unknown structures."""
    return _ENCODER.encode(value)


_CALL_KEYS = frozenset({"id", "type", "function"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})


def plain_calls_key(value: Any) -> tuple | None:
    """Tool calls of the plain chat shape (``id``, ``type``, ``function`` with ``name`` and ``arguments``, all
    strings) as a tuple of their strings' lengths and hashes, for a count-cache key; None for any other shape
    (keyed by its canonical JSON)."""
    if type(value) is not list:
        return None
    out = []
    for call in value:
        if type(call) is not dict or call.keys() != _CALL_KEYS:
            return None
        function = call["function"]
        if type(function) is not dict or function.keys() != _FUNCTION_KEYS:
            return None
        strings = (call["id"], call["type"], function["name"], function["arguments"])
        if not all(type(text) is str for text in strings):
            return None
        out.append(tuple((len(text), hash(text)) for text in strings))
    return tuple(out)
