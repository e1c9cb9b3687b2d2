"""The effective window, where LiteLLM serves model information to clients.

Contract: ``advertise(path, payload, advert, admin)`` returns a copy of the JSON ``payload`` LiteLLM answered
on ``path`` (one of ``ROUTES``) with each model group's window as the caller's policy gives it, and never
mutates ``payload``. ``advert(group)`` is that group's ``Advertised`` (or None: left as it is):

* ``/v1/models``, ``/models``: each entry gains ``max_input_tokens`` (the input budget; the field
  Anthropic's Models API and LiteLLM use), ``context_length`` (budget + output reserve, the window the gateway
  enforces, OpenRouter's field) and a ``budget_hook`` object with every term;
* ``/model/info``, ``/v1/model/info`` (per deployment: ``model_info``) and ``/model_group/info`` (per group):
  the ``budget_hook`` object, and ``max_input_tokens`` lowered to the budget, except for a proxy admin (the
  admin UI edits deployments from these values: lowered there, an edit could save the budget as the window).

Groups the plugin leaves alone for this caller (mode off or shadow, unknown window blocked) are untouched, and
so are wildcard entries (``openai/*``): a pattern has no window, the model a request names has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..pipeline import Advertised

LISTS = ("/v1/models", "/models")
DEPLOYMENTS = ("/model/info", "/v1/model/info")
GROUPS = ("/model_group/info",)
ROUTES = LISTS + DEPLOYMENTS + GROUPS


def groups_in(path: str, payload: Any) -> list[str]:
    """The model groups ``payload`` names (what ``advert`` will be asked about)."""
    key = {**dict.fromkeys(LISTS, "id"), **dict.fromkeys(DEPLOYMENTS, "model_name"), "/model_group/info": "model_group"}
    rows = payload.get("data") if isinstance(payload, Mapping) else None
    if key.get(path) is None or not isinstance(rows, list):
        return []
    return list(dict.fromkeys(row[key[path]] for row in rows if isinstance(row, Mapping)
                              and isinstance(row.get(key[path]), str) and "*" not in row[key[path]]))


def advertise(path: str, payload: Any, advert: Callable[[str], Advertised | None], admin: bool) -> Any:
    rows = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(rows, list):
        return payload

    def row_of(row: Any) -> Any:
        if not isinstance(row, Mapping):
            return row
        if path in LISTS:
            facts = _facts(advert, row.get("id"))
            if facts is None:
                return row
            return {**row, "max_input_tokens": facts.input_budget,
                    "context_length": (facts.input_budget or 0) + (facts.output_reserve or 0),
                    "budget_hook": facts.facts()}
        if path in DEPLOYMENTS:
            facts = _facts(advert, row.get("model_name"))
            info = row.get("model_info")
            if facts is None or not isinstance(info, Mapping):
                return row
            return {**row, "model_info": _lowered(info, facts, admin)}
        facts = _facts(advert, row.get("model_group"))
        return row if facts is None else _lowered(row, facts, admin)

    return {**payload, "data": [row_of(row) for row in rows]}


def is_proxy_admin(user_api_key_dict: Any) -> bool:
    role = getattr(user_api_key_dict, "user_role", None)
    return getattr(role, "value", role) == "proxy_admin"


def _facts(advert: Callable[[str], Advertised | None], group: Any) -> Advertised | None:
    facts = advert(group) if isinstance(group, str) else None
    return facts if facts is not None and facts.input_budget is not None else None


def _lowered(entry: Mapping[str, Any], facts: Advertised, admin: bool) -> dict[str, Any]:
    out = {**entry, "budget_hook": facts.facts()}
    if not admin:
        out["max_input_tokens"] = facts.input_budget
    return out
