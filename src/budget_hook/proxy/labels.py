"""What records, messages and metrics call a request's model group (pure: the router is passed in).

A client names the model it wants: until the router says the operator configured that name, it is
client-chosen text, which may carry anything (a secret, personal data, a megabyte) and has no end of
values. Contract: ``group_labels(router, group, team_id)`` returns ``(shown, metrics)`` (``labelled(router,
request)`` sets them on a ``BudgetRequest``):

* ``shown`` is None when the name may be shown as it is: a ``model_list`` group, a router alias or routing
  group, a team's model, a deployment id (or, outside a router, any name: the CLI, tests). Otherwise the
  name the operator configured instead: the wildcard pattern a name matched (``wild/*``), else
  ``unconfigured``; messages and records then use it, and no text derived from the name.
* ``metrics`` is the Prometheus label, only ever a configured name or a fixed label (``unconfigured``,
  ``multiple`` for a comma-separated list): made-up names can neither read as a group nor grow the series.

Never raises: a router that does not answer as expected gives ``unconfigured``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..pipeline import BudgetRequest
from .windows import listed_groups

UNCONFIGURED = "unconfigured"
MULTIPLE = "multiple"


def _configured(router: Any, name: str, team_id: str | None) -> bool:
    """The operator's own name: a group of ``model_list``, an alias, a routing group, a team model, a deployment id."""
    if name in (getattr(router, "model_name_to_deployment_indices", None) or {}):
        return True
    if name in (getattr(router, "model_group_alias", None) or {}):
        return True
    if team_id is not None and (team_id, name) in (getattr(router, "team_model_to_deployment_indices", None) or {}):
        return True
    routing_group = getattr(router, "get_routing_group", None)
    if callable(routing_group) and routing_group(name) is not None:
        return True
    has_id = getattr(router, "has_model_id", None)
    return bool(callable(has_id) and has_id(name))


def _pattern(router: Any, name: str) -> str | None:
    """The wildcard group (``wild/*``) a name matches, if any."""
    patterns = getattr(router, "pattern_router", None)
    deployments = patterns.route(name) if patterns is not None else None
    for deployment in deployments or ():
        group = deployment.get("model_name") if isinstance(deployment, dict) else None
        if isinstance(group, str) and group:
            return group
    return None


def _one(router: Any, name: str, team_id: str | None) -> str | None:
    """None when ``name`` is configured, else what to call it."""
    if _configured(router, name, team_id):
        return None
    return _pattern(router, name) or UNCONFIGURED


def group_labels(router: Any, group: str, team_id: str | None = None) -> tuple[str | None, str]:
    """``(shown, metrics)`` for the requested ``group`` (see the module's contract)."""
    if router is None:
        return None, UNCONFIGURED
    try:
        names = listed_groups(group)
        labels = [_one(router, name, team_id) for name in names]
    except Exception:  # a router of another version: nothing it says can be trusted to be configured
        return UNCONFIGURED, UNCONFIGURED
    if len(names) == 1:
        return labels[0], labels[0] or group
    # LiteLLM's batch completion: each listed group, deduplicated (a client may list one name a million times)
    shown = ",".join(dict.fromkeys(label or name for label, name in zip(labels, names, strict=True)))
    return (None if shown == group else shown), MULTIPLE


def labelled(router: Any, request: BudgetRequest) -> BudgetRequest:
    """``request`` with the labels of its model group (``shown_group``, ``metrics_group``)."""
    shown, metrics = group_labels(router, request.model_group, request.caller.team_id)
    return replace(request, shown_group=shown, metrics_group=metrics)
