"""A model group's context window: the ``ModelLimits`` fact, and the model map as an offline source.

``ModelLimits`` is what the gateway knows about the routed group (its window and where it came from,
which backend counts it). The proxy adapter finds it through the router (``proxy.windows``); the CLI and
other offline tools use ``lookup_max_input_tokens``.

Contract: ``lookup_max_input_tokens(model)`` returns the input window for ``model`` from
``litellm/model_prices_and_context_window_backup.json`` (the offline copy of LiteLLM's model map), or
None when the model is unknown. Inside the proxy the plugin asks the router instead, which also knows
config ``model_info`` overrides; this module serves the CLI and other offline tools.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..providers import anthropic


@dataclass(frozen=True)
class ModelLimits:
    """The routed group's input window and where it came from."""

    #: None when no source knows it (the policy then decides)
    window: int | None
    #: e.g. "router: min over 2 deployments", "model map: gpt-4o", "policy default"
    source: str
    #: the backend model whose tokenizer counts the request (``anthropic/claude-...``)
    counting_model: str
    base_model: str | None = None
    deployments: int = 0
    #: the group names the request routes to (differs from the requested name for a router alias)
    routed_groups: tuple[str, ...] = ()
    #: the output allowance LiteLLM itself sends when a chat request sets none: Anthropic's API requires
    #: ``max_tokens``, so for Claude deployments LiteLLM fills in the model's maximum output (4,096 when
    #: the model is not in its map); None when no deployment of the group gets one filled in
    filled_output_tokens: int | None = None
    #: the router's ids of the deployments the request may go to (what is learned is kept per deployment)
    deployment_ids: tuple[str, ...] = ()
    #: a ``/completions`` list of prompts reaches a deployment of the group as the user messages of one chat call
    #: (``router_windows.joins_prompts``): they must fit the window together
    joins_prompts: bool = True
    #: the window when the request replaces the ``anthropic-beta`` header a deployment sends for its 1M window
    #: (``router_windows.with_client_headers``); None when no deployment's window needs a header it sends
    beta_window: int | None = None
    #: what in a request replaces that header (``router_windows.header_replacers``: ``extra_headers``, ``headers``,
    #: ``http``)
    beta_replacers: tuple[str, ...] = ()
    #: the request's own headers take the place of the one a deployment sends for its window (whether or not they hold
    #: the long-window value): the window the provider applied was the request's to choose, so its error teaches none
    client_beta: bool = False
    #: a deployment of the group gets an allowance filled in when a request asks for thinking and sets none, whatever
    #: its model (``router_windows.fills_thinking_output``: a Bedrock inference profile's ARN, Qwen or GLM on Bedrock)
    fills_thinking_output: bool = False


@functools.lru_cache(maxsize=1)
def _model_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "model_prices_and_context_window_backup.json"
        if path.is_file():
            table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return table
    return {}


def _candidates(model: str) -> list[str]:
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
        candidates.append(model.rsplit("/", 1)[1])
    return candidates


def _lookup(model: str, key: str) -> int | None:
    """The model map's ``key`` for ``model`` (else its ``max_tokens``), tried under every spelling."""
    table = _model_map()
    for name in _candidates(model):
        entry = table.get(name)
        if isinstance(entry, dict):
            value = entry.get(key) or entry.get("max_tokens")
            if isinstance(value, int) and value > 0:
                return value
    return None


def model_map_entry(model: str, *, exact: bool = False) -> Mapping[str, Any] | None:
    """The model map's entry for ``model`` under its first spelling that has one (``exact``: that name only)."""
    table = _model_map()
    names = [model] if exact else _candidates(model)
    return next((entry for name in names if isinstance(entry := table.get(name), dict)), None)


def lookup_max_input_tokens(model: str) -> int | None:
    """Input window of ``model`` (``gpt-4o``, ``openai/gpt-4o``, ``anthropic/claude-...``), None if unknown."""
    return _lookup(model, "max_input_tokens")


#: what LiteLLM sends as ``max_tokens`` to a Claude model its map does not know
#: (``DEFAULT_ANTHROPIC_CHAT_MAX_TOKENS``)
DEFAULT_ANTHROPIC_MAX_TOKENS = anthropic.RECORD.windows.default_max_tokens


def lookup_max_output_tokens(model: str) -> int | None:
    """The model's maximum output from the model map (``max_output_tokens``, else ``max_tokens``)."""
    return _lookup(model, "max_output_tokens")
