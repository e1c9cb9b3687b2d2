"""Context windows from the model map that ships in the litellm wheel, read without importing litellm.

Contract: ``lookup_max_input_tokens(model)`` returns the input window for ``model`` from
``litellm/model_prices_and_context_window_backup.json`` (the offline copy of LiteLLM's model map), or
None when the model is unknown. Inside the proxy the plugin asks the router instead, which also knows
config ``model_info`` overrides; this module serves the CLI and other offline tools.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=1)
def _model_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "model_prices_and_context_window_backup.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return {}


def lookup_max_input_tokens(model: str) -> int | None:
    """Input window of ``model`` (``gpt-4o``, ``openai/gpt-4o``, ``anthropic/claude-...``), None if unknown."""
    table = _model_map()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
        candidates.append(model.rsplit("/", 1)[1])
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict):
            value = entry.get("max_input_tokens") or entry.get("max_tokens")
            if isinstance(value, int) and value > 0:
                return value
    return None
