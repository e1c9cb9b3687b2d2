"""Shared test set-up: offline, quiet, and the real data shipped in tests/data (see its README)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples (a red CI must mean a change broke something, not
# that a new random example turned up); local runs keep exploring, and keep what they find in .hypothesis/
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).parent / "data"
CONVERSATIONS = sorted((DATA / "conversations").glob("*_[0-9][0-9].json"))


def as_it_is(out, data) -> bool:
    """Whether the pre-call hook forwarded ``data`` as it is: its own values, in a copy that adds only the gateway's
    ``retry_policy`` (``bounds.gateway_parameters``: no retry LiteLLM's client wrapper would make without the hooks)."""
    return isinstance(out, dict) and out is not data and out.get("retry_policy") == {"DefaultRetries": 0} \
        and all(out[key] is value for key, value in data.items() if key != "retry_policy")


def load_json(relative: str):
    return json.loads((DATA / relative).read_text(encoding="utf-8"))


def conversation_request(path: Path, model: str = "gpt-4o") -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    request = {"model": model, "messages": data["messages"]}
    if data.get("tools"):
        request["tools"] = data["tools"]
    if data.get("functions"):
        request["functions"] = data["functions"]
    return request


@pytest.fixture(scope="session")
def gpt4o():
    from budget_hook.counting import TokenCounter

    return TokenCounter.for_model("gpt-4o")
