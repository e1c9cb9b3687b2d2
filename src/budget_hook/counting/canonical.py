"""Deterministic JSON: what unknown structures are counted as, and what content hashes are taken over."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON used for hashing and for counting unknown structures."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)

