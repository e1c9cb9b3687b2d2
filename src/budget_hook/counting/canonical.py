"""Deterministic JSON: what unknown structures are counted as, and what content hashes are taken over."""

from __future__ import annotations

import json
from typing import Any

#: one encoder for every call (``json.dumps`` with these arguments builds a new one each time: a third of its
#: cost on the small structures hashed per message); ``encode`` keeps no state between calls
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical_json(value: Any) -> str:
    """Deterministic JSON used for hashing and for counting unknown structures."""
    return _ENCODER.encode(value)

