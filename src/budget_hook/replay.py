"""``budget-hook replay``: decide captured traffic offline, as the proxy would, and summarise it.

Contract: ``load_items(path)`` reads a JSONL file, one request per line: ``{"model": group, "route":
"/v1/messages", "team": id, "body": {...}}`` (``route`` and ``team`` optional; ``model`` defaults to the
body's), or a bare request body. ``replay(items, config, overrides)`` decides each with the settings of a
LiteLLM config (``callback_settings.budget_hook``, with ``overrides`` on top) and its ``model_list``
windows (``proxy.windows.limits_of`` without a router: the minimum over a group's deployments of
``model_info.max_input_tokens``, else the model map), and
returns one row per request. ``summarise(rows)`` totals them per model group and team: pass / trimmed /
blocked, tokens before and after, and the cache-stable share (of consecutive requests of a group and team
whose earlier one was trimmed, how often its forwarded history is an exact prefix of the next one's: what
keeps a provider's prompt cache warm). Pure: no litellm, no network; a bad line is reported, not fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .budget import ModelLimits
from .pipeline import BudgetRequest, Caller, decide
from .policy import load_settings
from .proxy.windows import limits_of
from .shapes import SHAPES, Shape

#: route -> shape, for lines that say where they were sent
ROUTES = {"/chat/completions": "chat", "/v1/chat/completions": "chat", "/v1/messages": "anthropic",
          "/responses": "responses", "/v1/responses": "responses", "/completions": "completions",
          "/v1/completions": "completions", "/embeddings": "embeddings", "/v1/embeddings": "embeddings"}
#: where each shape keeps the history a prompt cache keys on
HISTORY = {"chat": "messages", "anthropic": "messages", "responses": "input", "gemini": "contents"}


@dataclass(frozen=True)
class Item:
    line: int
    model_group: str
    team: str | None
    shape: Shape | None
    body: Mapping[str, Any]
    problem: str | None = None


def load_items(path: str | Path) -> list[Item]:
    items = []
    for number, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            items.append(Item(number, "", None, None, {}, f"not JSON: {exc.msg}"))
            continue
        body = data.get("body") if isinstance(data, dict) and isinstance(data.get("body"), dict) else data
        if not isinstance(body, dict):
            items.append(Item(number, "", None, None, {}, "not a JSON object"))
            continue
        wrapper = data if body is not data else {}
        group = str(wrapper.get("model") or body.get("model") or "")
        route = str(wrapper.get("route") or "")
        shape = SHAPES.get(ROUTES[route]) if route in ROUTES else SHAPES.detect(body)
        team = wrapper.get("team")
        problem = None if shape is not None and group else "no model group" if not group else "unknown format"
        items.append(Item(number, group, str(team) if team is not None else None, shape, body, problem))
    return items


def group_limits(config: Mapping[str, Any], group: str) -> ModelLimits:
    """A group's window as the proxy would find it, from the config alone (no router: no upstream discovery)."""
    deployments = [d for d in config.get("model_list") or [] if isinstance(d, Mapping) and d.get("model_name") == group]
    return limits_of(None, group, deployments)


def replay(items: Iterable[Item], config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
           ) -> list[dict[str, Any]]:
    raw = dict((config.get("callback_settings") or {}).get("budget_hook") or {})
    settings = load_settings({**raw, **(overrides or {})})
    rows = []
    for item in items:
        row: dict[str, Any] = {"line": item.line, "model_group": item.model_group, "team": item.team}
        if item.problem is not None or item.shape is None:
            rows.append({**row, "action": "unreadable", "problem": item.problem})
            continue
        request = BudgetRequest(shape=item.shape, body=item.body, model_group=item.model_group,
                                limits=group_limits(config, item.model_group), caller=Caller(team_id=item.team))
        try:
            decision = decide(request, settings)
        except Exception as exc:  # the plugin's own failure, as the proxy's fail mode would meet it
            rows.append({**row, "action": "error", "problem": f"{type(exc).__name__}: {exc}"})
            continue
        report = decision.report
        field = HISTORY.get(item.shape.name)
        forwarded = decision.request.get(field) if field and decision.action != "blocked" else None
        rows.append({**row, "format": item.shape.name, "action": decision.action,
                     "tokens_before": decision.tokens_before, "tokens_after": decision.tokens_after,
                     "window": decision.limits.window,
                     "dropped": sum(1 for a in report.actions if a.action == "dropped") if report else 0,
                     "history": forwarded if isinstance(forwarded, list) else None})
    return rows


def _prefix(earlier: list[Any], later: list[Any]) -> bool:
    return len(earlier) <= len(later) and all(a == b for a, b in zip(earlier, later, strict=False))


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["model_group"], row["team"] or "")
        total = groups.setdefault(key, {"model_group": key[0], "team": key[1], "requests": 0, "pass": 0, "trimmed": 0,
                                        "blocked": 0, "other": 0, "tokens_before": 0, "tokens_after": 0,
                                        "trimmed_pairs": 0, "prefix_stable": 0})
        total["requests"] += 1
        action = row["action"]
        bucket = {"pass": "pass", "trimmed": "trimmed", "would_trim": "trimmed", "blocked": "blocked",
                  "would_block": "blocked"}.get(action, "other")
        total[bucket] += 1
        total["tokens_before"] += row.get("tokens_before") or 0
        total["tokens_after"] += (row.get("tokens_after") or 0) if bucket != "blocked" else 0
        previous = last.get(key)
        if previous is not None and previous["action"] in ("trimmed", "would_trim") and row.get("history") is not None \
                and previous.get("history") is not None:
            total["trimmed_pairs"] += 1
            total["prefix_stable"] += _prefix(previous["history"], row["history"])
        if row.get("history") is not None:
            last[key] = row
    out = []
    for total in groups.values():
        pairs = total.pop("trimmed_pairs")
        stable = total.pop("prefix_stable")
        total["cache_stable_share"] = round(stable / pairs, 3) if pairs else None
        total["tokens_saved"] = total["tokens_before"] - total["tokens_after"]
        out.append(total)
    return out


def table(summary: list[dict[str, Any]]) -> str:
    columns = ("model_group", "team", "requests", "pass", "trimmed", "blocked", "other", "tokens_before",
               "tokens_saved", "cache_stable_share")
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join("" if row[c] is None else str(row[c]) for c in columns) for row in summary]
    return "\n".join(lines)
