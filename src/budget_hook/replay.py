"""``budget-hook replay``: decide captured traffic offline, as the proxy would, and summarise it.

Contract: ``load_items(path)`` reads a capture, JSONL, one request per line: ``{"model": group, "route":
"/v1/messages", "team": id, "body": {...}}`` (``route`` and ``team`` optional; ``model`` defaults to the
body's), or a bare request body; or LiteLLM's spend-log export (rows of ``LiteLLM_SpendLogs`` as a JSON array,
``{"data": [...]}``, JSONL or CSV: ``proxy_server_request`` is the body, ``call_type`` the format,
``model_group`` and ``team_id``), replayed in ``startTime`` order. LiteLLM cuts each string of a stored body
to ``MAX_STRING_LENGTH_PROMPT_IN_DB`` characters: the cut is put back as filler of its length and the row
says how many characters (``restored_chars``; the summary's ``approximate``). A proxy already running
budget_hook writes its decision into each row (``spend_logs_metadata.budget_hook``: ``live_action``); LiteLLM
stores the body it forwarded, so a request trimmed live is replayed as trimmed (``as_forwarded``: the client's
own body is not in the log). Export before enforcing, or in shadow mode, to replay what clients sent.

``replay(items, config, overrides)`` decides each with the settings of a LiteLLM config
(``callback_settings.budget_hook``, with ``overrides`` on top) and its ``model_list`` windows
(``budget.router_windows.limits_of`` without a router: the minimum over a group's deployments of
``model_info.max_input_tokens``, else the model map), and returns one row per request.
``summarise(rows)`` totals them per model group and team: pass / trimmed / blocked, tokens before and after,
and the cache-stable share (of consecutive requests of a group and team whose earlier one was trimmed, how
often its forwarded history is an exact prefix of the next one's: what keeps a provider's prompt cache warm).
Pure: no litellm, no network, nothing of the ``proxy`` package; a bad line is reported, not fatal.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .budget import ModelLimits
from .budget.router_windows import limits_of
from .pipeline import BudgetRequest, Caller, decide
from .pipeline.record import tokens_left
from .policy import load_settings
from .shapes import SHAPES, Shape

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
    #: when the request was sent (spend logs), to replay in order
    start: str = ""
    #: characters LiteLLM's spend log had cut out of the body, put back as filler
    restored_chars: int = 0
    #: the decision budget_hook made live, when the spend log carries it (``spend_logs_metadata.budget_hook``)
    live: Mapping[str, Any] | None = None


def load_items(path: str | Path) -> list[Item]:
    """Requests from a capture (JSONL) or a LiteLLM spend-log export (JSON array, JSONL or CSV), in time order."""
    items = [_item(number, record) for number, record in _records(Path(path))]
    if any(item.start for item in items):  # spend logs list newest first: replay in the order they were sent
        items.sort(key=lambda item: item.start or "")
    return items


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line or row number, decoded record): a decoding problem is the record ``_Problem(...)``."""
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if path.suffix.lower() == ".csv" or stripped.startswith("request_id,"):
        csv.field_size_limit(1 << 30)
        for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
            yield number, dict(row)
        return
    try:  # one JSON document: an array of rows (/spend/logs), a page {"data": [...]}, or a one-line capture
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    else:
        if isinstance(whole, dict) and isinstance(whole.get("data"), list):
            whole = whole["data"]
        yield from enumerate(whole if isinstance(whole, list) else [whole], start=1)
        return
    for number, line in enumerate(text.splitlines(), start=1):  # JSONL
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, _Problem(f"not JSON: {exc.msg}")


@dataclass(frozen=True)
class _Problem:
    message: str


def _item(number: int, data: Any) -> Item:
    if isinstance(data, _Problem):
        return Item(number, "", None, None, {}, data.message)
    if isinstance(data, dict) and ("proxy_server_request" in data or "call_type" in data):
        return _spend_log_item(number, data)
    body = data.get("body") if isinstance(data, dict) and isinstance(data.get("body"), dict) else data
    if not isinstance(body, dict):
        return Item(number, "", None, None, {}, "not a JSON object")
    wrapper = data if body is not data else {}
    group = str(wrapper.get("model") or body.get("model") or "")
    route = str(wrapper.get("route") or "")
    shape = SHAPES.for_route(route) or SHAPES.detect(body)  # the route's shape, when the line names one
    team = wrapper.get("team")
    return _checked(Item(number, group, str(team) if team is not None else None, shape, body))


def _checked(item: Item) -> Item:
    problem = None if item.shape is not None and item.model_group else \
        "no model group" if not item.model_group else "unknown format"
    return replace(item, problem=problem) if problem else item


def _json_field(value: Any) -> Any:
    """A spend-log JSON column: an object, or its text (CSV exports, some API versions)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


def _spend_log_item(number: int, row: dict[str, Any]) -> Item:
    """A row of LiteLLM's ``LiteLLM_SpendLogs`` (``/spend/logs``, or the table exported): the request body is
    ``proxy_server_request``, stored only with ``general_settings.store_prompts_in_spend_logs: true``, and
    LiteLLM cuts each string over ``MAX_STRING_LENGTH_PROMPT_IN_DB`` (2,048) characters to a marker, which is
    put back as filler of the skipped length (about 4 characters a token) and counted on the row."""
    body = _json_field(row.get("proxy_server_request"))
    metadata = _json_field(row.get("metadata"))
    group = str(row.get("model_group") or (body.get("model") if isinstance(body, dict) else "") or "")
    team = row.get("team_id") or (metadata.get("user_api_key_team_id") if isinstance(metadata, dict) else None)
    start = str(row.get("startTime") or row.get("start_time") or "")
    if not isinstance(body, dict) or not body:
        return Item(number, group, team, None, {}, "no request body in the spend log (LiteLLM stores it with "
                    "general_settings.store_prompts_in_spend_logs: true)", start=start)
    body, skipped = _untruncated(body)
    shape = SHAPES.for_call_type(row.get("call_type")) or SHAPES.detect(body)
    spend = metadata.get("spend_logs_metadata") if isinstance(metadata, dict) else None
    live = _json_field(spend).get("budget_hook") if isinstance(_json_field(spend), dict) else None
    if live is None and isinstance(metadata, dict):  # a block on LiteLLM 1.108: in its guardrail results only
        guardrails = _json_field(metadata.get("guardrail_information"))
        live = next((g.get("budget_hook") for g in guardrails if isinstance(g, dict)
                     and g.get("guardrail_name") == "budget_hook"), None) if isinstance(guardrails, list) else None
    return _checked(Item(number, group, str(team) if team else None, shape, body, start=start, restored_chars=skipped,
                         live=live if isinstance(live, dict) else None))


#: LiteLLM's marker: ``... (litellm_truncated skipped N chars. <a note, with parentheses of its own>) ...``
_TRUNCATED = re.compile(r"\.\.\. \(litellm_truncated skipped (\d{1,12}) chars\. .{0,600}?\) \.\.\.", re.DOTALL)


def _untruncated(value: Any) -> tuple[Any, int]:
    """``value`` with every spend-log truncation marker replaced by filler of the length it skipped."""
    if isinstance(value, str):
        skipped = 0

        def filler(match: re.Match[str]) -> str:
            nonlocal skipped
            skipped += int(match.group(1))
            return ("fill " * (int(match.group(1)) // 5 + 1))[: int(match.group(1))]

        return _TRUNCATED.sub(filler, value), skipped
    if isinstance(value, dict):
        pairs = [(k, _untruncated(v)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(value, list):
        parts = [_untruncated(v) for v in value]
        return [v for v, _ in parts], sum(n for _, n in parts)
    return value, 0


def group_limits(config: Mapping[str, Any], group: str) -> ModelLimits:
    """A group's window as the proxy would find it, from the config alone (no router: no upstream discovery)."""
    deployments = [d for d in config.get("model_list") or [] if isinstance(d, Mapping) and d.get("model_name") == group]
    return limits_of(group, deployments)


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
        live = item.live or {}
        if live:
            row.update(live_action=live.get("action"), live_tokens_before=live.get("tokens_before"))
        if live.get("action") == "trimmed":  # LiteLLM stored the body the proxy forwarded, not the client's
            row["as_forwarded"] = True
        rows.append({**row, "format": item.shape.name, "action": decision.action,
                     "tokens_before": decision.tokens_before, "tokens_after": decision.tokens_after,
                     "window": decision.limits.window, "input_budget": report.budget.budget if report else None,
                     "restored_chars": item.restored_chars,
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
                                        "trimmed_pairs": 0, "prefix_stable": 0, "approximate": 0, "as_forwarded": 0})
        total["requests"] += 1
        total["approximate"] += bool(row.get("restored_chars"))
        total["as_forwarded"] += bool(row.get("as_forwarded"))
        action = row["action"]
        bucket = {"pass": "pass", "trimmed": "trimmed", "would_trim": "trimmed", "blocked": "blocked",
                  "would_block": "blocked"}.get(action, "other")
        total[bucket] += 1
        total["tokens_before"] += row.get("tokens_before") or 0
        total["tokens_after"] += tokens_left(action, row.get("tokens_before"), row.get("tokens_after"))
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
               "tokens_saved", "cache_stable_share", "approximate", "as_forwarded")
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join("" if row[c] is None else str(row[c]) for c in columns) for row in summary]
    return "\n".join(lines)
