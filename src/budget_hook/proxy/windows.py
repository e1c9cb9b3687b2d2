"""A model group's window as LiteLLM's router sees it: the router asked, its answers handed to the rules.

Contract: ``limits_from_router(router, group)`` returns ``ModelLimits``: the **minimum**
``max_input_tokens`` over the group's deployments, with the router's own precedence (config
``model_info`` over upstream discovery over the model map), following aliases and wildcards; else the
model map for the name itself; else unknown (the policy decides). What touches the router (LiteLLM's
object, passed in, never imported) is here: its deployments (``get_model_list``), what it knows of each
(``get_router_model_info``), its ``model_list``. The rules themselves are pure and live in
``budget/router_windows.py`` (the offline ``budget-hook replay`` uses them without this package); the
names below re-export them for the adapter. ``WindowCache`` reuses an answer for ``LIMITS_TTL_SECONDS``:
upstream discovery and admin edits change the router's answers at run time. ``model_name_error`` is an
HTTP answer (an ``ErrorSpec``) for a name no group can have.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from ..budget import router_windows as rules
from ..budget.router_windows import (
    MAX_LISTED_GROUPS,
    STANDARD_CLAUDE_WINDOW,
    combine,
    covers,
    header_dependent_window,
    listed_groups,
    sends_1m_beta,
    too_long,
    with_learned_window,
    without_snapshot_suffixes,
)
from ..budget.windows import ModelLimits
from ..counting.profiles import MAX_MODEL_NAME_CHARS
from .errors import ErrorSpec

__all__ = ["LIMITS_TTL_SECONDS", "MAX_CACHED_GROUPS", "MAX_LISTED_GROUPS", "STANDARD_CLAUDE_WINDOW", "WindowCache",
           "combine", "configured_window", "covers", "deployment_limits", "deployments_of", "header_dependent_window",
           "limits_from_router", "limits_of", "listed_groups", "model_name_error", "routed_groups", "sends_1m_beta",
           "too_long", "with_learned_window", "without_snapshot_suffixes"]

T = TypeVar("T")

#: how long a model group's window is reused before asking the router again
LIMITS_TTL_SECONDS = 60.0
#: groups cached at most (names come from clients)
MAX_CACHED_GROUPS = 4096


def model_name_error(model: str) -> ErrorSpec | None:
    """A clean 400 for a ``model`` no group can have: a name longer than ``MAX_MODEL_NAME_CHARS``, or a list
    of more than ``MAX_LISTED_GROUPS``. Refused before anything reads it: LiteLLM's own handling of a name it
    does not serve ends in its error-message redaction, whose patterns take quadratic time in a long run of
    letters, digits and hyphens (seconds for 9 KB: the event loop's). The message does not echo the name."""
    names = model.split(",", MAX_LISTED_GROUPS)
    if len(names) <= MAX_LISTED_GROUPS and all(len(name) <= MAX_MODEL_NAME_CHARS for name in names):
        return None  # a list of groups (LiteLLM's batch completion), each name of a sane length
    return ErrorSpec(400, f"budget_hook refused this request (invalid_model_name): its model name is {len(model):,} "
                     f"characters long; a model name has at most {MAX_MODEL_NAME_CHARS} characters (a comma-separated "
                     f"list of groups: at most {MAX_LISTED_GROUPS} such names)", "invalid_request_error",
                     "invalid_model_name", "model", {"model_chars": len(model)})


def limits_from_router(router: Any, group: str) -> ModelLimits:
    """Minimum window over the group's deployments, per the router; then the model map; else unknown."""
    return too_long(group) or limits_of(router, group, deployments_of(router, group))


def deployment_limits(router: Any, group: str, deployment_id: str) -> ModelLimits | None:
    """The limits of one deployment of ``group`` (the one an attempt goes to), None if the router has none
    with that id."""
    if len(group) > MAX_MODEL_NAME_CHARS:
        return None
    found = [d for d in deployments_of(router, group) if (d.get("model_info") or {}).get("id") == deployment_id]
    return limits_of(router, group, found[:1]) if found else None


def configured_window(router: Any, deployment_id: str | None) -> int | None:
    """The window the router gives the deployment with ``deployment_id`` (nothing learned), or None."""
    if router is None or not isinstance(deployment_id, str):
        return None
    model_list = getattr(router, "model_list", None)
    for entry in model_list if isinstance(model_list, list) else ():
        info = entry.get("model_info") if isinstance(entry, dict) else None
        if isinstance(info, dict) and info.get("id") == deployment_id:
            return limits_of(router, str(entry.get("model_name") or ""), [entry]).window
    return None


def deployment_params(router: Any, deployment_id: str | None) -> Mapping[str, Any]:
    """The parameters the operator configured for the deployment with ``deployment_id``: the router's
    ``default_litellm_params`` (which it merges into every call), then the deployment's ``litellm_params``."""
    defaults = getattr(router, "default_litellm_params", None) if router is not None else None
    found: dict[str, Any] = dict(defaults) if isinstance(defaults, Mapping) else {}
    model_list = getattr(router, "model_list", None) if router is not None and isinstance(deployment_id, str) else None
    for entry in model_list if isinstance(model_list, list) else ():
        info = entry.get("model_info") if isinstance(entry, dict) else None
        if isinstance(info, dict) and info.get("id") == deployment_id:
            params = entry.get("litellm_params")
            found.update(params if isinstance(params, Mapping) else {})
            break
    return found


def deployments_of(router: Any, group: str) -> list[Any]:
    if router is None:
        return []
    try:
        return list(router.get_model_list(model_name=group) or [])
    except Exception:
        return []


def serves_pass_through(router: Any, name: str) -> bool:
    """Has the router a deployment of the group ``name`` that LiteLLM's Vertex AI pass-through may use
    (``use_in_pass_through``: it then serves the URL's model from that deployment)?"""
    return len(name) <= MAX_MODEL_NAME_CHARS and any(
        isinstance(d, Mapping) and isinstance(d.get("litellm_params"), Mapping)
        and d["litellm_params"].get("use_in_pass_through") for d in deployments_of(router, name))


def router_info(router: Any, group: str, deployment: Any) -> Mapping[str, Any]:
    """What the router knows of one deployment (``max_input_tokens``, ``max_output_tokens``), ``{}`` when
    nothing: an unmapped model makes the router raise, and the rules fall back."""
    if router is None:
        return {}
    try:
        info = router.get_router_model_info(deployment=deployment, received_model_name=group)
    except Exception:
        return {}
    return info if isinstance(info, Mapping) else {}


def _unknown_output(model: str) -> int | None:
    return None


#: the maximum output LiteLLM reads for a deployment's model, by its name without the provider, from its live model
#: map (``litellm.model_cost``; the adapter sets this): every deployment of the model shares that entry, and the last
#: one registered writes it, so it may not be the deployment's own
shared_output: Callable[[str], int | None] = _unknown_output


def limits_of(router: Any, group: str, deployments: list[Any]) -> ModelLimits:
    """Minimum window over ``deployments`` of ``group`` (the rules: ``budget.router_windows.limits_of``),
    with what the router knows of each (its model's ``shared_output``, the router's ``default_litellm_params``)
    and its ``model_list``."""
    defaults = getattr(router, "default_litellm_params", None) if router is not None else None
    infos = [{**router_info(router, group, deployment), "default_params": defaults if isinstance(defaults, Mapping)
              else {}, "shared_output": _shared_output(router, deployment)} for deployment in deployments]
    return rules.limits_of(group, deployments, infos, getattr(router, "model_list", None))


def _shared_output(router: Any, deployment: Any) -> int | None:
    params = deployment.get("litellm_params") if router is not None and isinstance(deployment, Mapping) else None
    model = params.get("model") if isinstance(params, Mapping) else None
    if not isinstance(model, str) or len(model) > MAX_MODEL_NAME_CHARS:
        return None
    try:
        return shared_output(model.split("/", 1)[-1])
    except Exception:
        return None


def routed_groups(router: Any, group: str, deployments: list[Any]) -> tuple[str, ...]:
    """The groups ``deployments`` belong to in the router's ``model_list``, other than ``group``."""
    return rules.routed_groups(group, deployments, getattr(router, "model_list", None))


class WindowCache(Generic[T]):
    """Limits per group (or deployment), asked of ``lookup(name)`` at most once per ``ttl`` seconds."""

    def __init__(self, lookup: Callable[[str], T], *, ttl: float = LIMITS_TTL_SECONDS) -> None:
        self.lookup = lookup
        self.ttl = ttl
        self._cache: dict[str, tuple[float, T]] = {}

    def get(self, group: str) -> T:
        now = time.monotonic()
        cached = self._cache.get(group)
        if cached and now - cached[0] < self.ttl:
            return cached[1]
        limits = self.lookup(group)
        if len(group) > 2 * MAX_MODEL_NAME_CHARS:
            return limits  # not kept: no group has such a name, and clients choose names
        if len(self._cache) > MAX_CACHED_GROUPS:
            self._cache.clear()
        self._cache[group] = (now, limits)
        return limits
