"""What becomes of a decided request: one log line, what it teaches, the metrics (pure; no LiteLLM).

* ``log_outcome``: from the success or failure callback: the call's record settled (``records``), observed by
  the metrics, one ``budget_hook.decision`` JSON line with the provider's billed input next to the
  estimate, and what the answer taught (``feedback``: a success's usage, an overflow error's window);
* ``log_internal``: the plugin's own failure, as one ``budget_hook.internal_error`` line (CRITICAL) and the
  failure record it leaves;
* ``purge_later``: a failed call leaves after ``failed_seconds`` even when no other request comes.

The plugin is duck-typed (``records``, ``metrics``, ``learning``); ``ours`` is the adapter's own error type
(its refusals teach nothing) and ``router`` LiteLLM's router (or None).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import traceback
from collections.abc import Mapping
from typing import Any

from ..pipeline import BudgetRequest, DecisionRecord, InternalFailure
from .feedback import deployment_id, learn_from_error, learn_from_usage, provider_prompt_tokens
from .labels import group_labels
from .loglines import bounded_line, describe_error
from .windows import configured_window

logger = logging.getLogger("budget_hook")


def log_internal(exc: Exception, data: Mapping[str, Any], fail_mode: str, request: BudgetRequest | None,
                 router: Any) -> DecisionRecord:
    cause = exc.cause if isinstance(exc, InternalFailure) else exc
    record = DecisionRecord.failure(model_group=group_labels(router, str(data.get("model")))[0]
                                    or data.get("model"), error=f"{type(cause).__name__}: {cause}",
                                    fail_mode=fail_mode, request=request)
    logger.critical(json.dumps({"event": "budget_hook.internal_error", "call_id": data.get("litellm_call_id"),
                                **record.as_dict(),
                                "traceback": "".join(traceback.format_exception(cause, limit=8))}, default=str))
    return record


def purge_later(records: Any) -> None:
    """Failed calls (their records, and what they left for attempts) leave after ``failed_seconds`` even when
    no other request comes (a retry or fallback comes within that time)."""
    with contextlib.suppress(RuntimeError):  # no running loop: the next failure purges
        asyncio.get_running_loop().call_later(records.failed_seconds + 1.0, records.purge)


async def log_outcome(plugin: Any, outcome: str, kwargs: dict, response_obj: Any, *, ours: type,
                      router: Any) -> None:
    try:
        call_id = kwargs.get("litellm_call_id")
        record = plugin.records.settle(call_id, outcome)
        if record is None:
            return  # not a request this plugin decided on
        billed = provider_prompt_tokens(response_obj, kwargs) if outcome == "success" else None
        plugin.metrics.observe(record, outcome, billed)
        decision = record.as_dict()
        entry: dict[str, Any] = {
            "event": "budget_hook.decision",
            "outcome": outcome,
            "call_id": call_id,
            "model_group": record.model_group, "team_id": record.team_id, "team_alias": record.team_alias,
            "key_alias": record.key_alias,
            "decision": {k: v for k, v in decision.items() if k not in ("team_id", "team_alias", "key_alias")},
        }
        # a call id two requests shared (clients may choose theirs): which answer belongs to which record is
        # unknown, so neither teaches anything
        shared_id = plugin.records.collided(call_id)
        learned: dict[str, Any] | None = {"ignored": "another request used the same call id"} if shared_id else None
        if outcome == "success":
            entry.update(provider_prompt_tokens=billed, estimated_prompt_tokens=record.tokens_after)
            if not shared_id:
                learned = await learn_from_usage(plugin.learning, kwargs, record, billed)
        else:
            entry["error"] = describe_error(kwargs.get("exception"), with_text=record.log_content)
            if not shared_id:
                learned = await learn_from_error(plugin.learning, kwargs, record, ours=ours,
                                                 configured=configured_window(router, deployment_id(kwargs)))
            purge_later(plugin.records)
        if learned is not None:
            entry["learned"] = learned
        logger.info(bounded_line(entry))
    except Exception:  # a logging problem must never affect the response
        logger.exception("budget_hook: could not write the decision record")
