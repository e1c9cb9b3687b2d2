"""What becomes of a decided request: one log line, what it teaches, the metrics (pure; no LiteLLM).

* ``log_outcome``: from the success or failure callback: the call's record settled (``records``), observed by
  the metrics, one ``budget_hook.decision`` JSON line with the provider's billed input next to the
  estimate, and what the answer taught (``feedback``: a success's usage, an overflow error's window);
* ``log_internal``: the plugin's own failure, as one ``budget_hook.internal_error`` line (CRITICAL) and the
  failure record it leaves;
* ``purge_later``: a failed call leaves after ``failed_seconds`` even when no other request comes;
* ``remember_chain``, ``watch_chain``: a Responses call's chain stored from the response the client gets (the
  success callback's, the post-call hook's, a stream's ``response.completed`` event: ``chains``);
* ``note_overflow``: from the failure hook: a forwarded call the provider refused as too long gets the
  answer a block would have (``answers.overflow_answer``), kept with the call for the error handler, and the
  exception's message rewritten for routes that render it themselves (``/v1/messages``). For a request that
  itself contains overflow wording (``DecisionRecord.quotes_overflow``: providers quote client keys and values
  in their 400s) the answer carries no numbers from the provider's text, and nothing is learned from it;
* ``quoted``: whether a failed call's request quotes such wording, asked once per failed call (a request that
  succeeds is never searched: the question only matters for a provider's error).

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
from dataclasses import replace
from typing import Any

from ..learning import Overflow, parse_overflow, quotes_overflow
from ..pipeline import BudgetRequest, DecisionRecord, InternalFailure
from .answers import ProviderOverflow, overflow_answer, provider_overflow
from .chains import field_of
from .feedback import deployment_id, learn_from_error, learn_from_usage, provider_prompt_tokens
from .labels import group_labels
from .loglines import bounded_line, describe_error, write_line
from .windows import configured_window

logger = logging.getLogger("budget_hook")
#: a response id longer than this is not written into the record (LiteLLM's managed Responses ids: ~400)
MAX_RESPONSE_ID_CHARS = 1024


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


#: the values ``quoted`` searches (``learning.quotes_overflow``: every key, and no other value): LiteLLM's own objects
#: in the body (``litellm_logging_obj``: the provider request, the exception and several copies) are never kept for it
_SEARCHED = (dict, list, tuple, str, bytes)


def snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` two levels deep (its dicts and lists copied, what they hold shared): what ``quoted`` later
    searches, whatever LiteLLM pops from the body or its metadata once the hooks ran; a value it does not search is
    kept as None under its key (keys are searched)."""
    return {key: dict(value) if type(value) is dict else list(value) if type(value) is list else
            value if isinstance(value, _SEARCHED) else None for key, value in data.items()}


async def quoted(plugin: Any, call_id: Any) -> bool:
    """Whether the request of a call that failed quotes overflow wording anywhere (keys, metadata, headers:
    ``learning.quotes_overflow``), asked of the request the pre-call hook saw, once per call, in the pool (a
    failed call: the hop costs nothing next to it); True when it cannot be known. A provider's error that may
    echo it back teaches nothing."""
    records = plugin.records
    unasked, source = records.unasked(call_id)
    if unasked:
        try:
            quotes = await plugin.offloader.run(lambda: quotes_overflow(source), source, pool=True)
        except Exception:  # the search's own problem: the error is taken as an echo (it teaches nothing)
            logger.exception("budget_hook: could not search a request for overflow wording")
            quotes = True
        records.answer_quoted(call_id, quotes)
    return bool(records.quoted(call_id))


async def sent_quotes(plugin: Any, kwargs: Mapping[str, Any]) -> bool:
    """Whether the body LiteLLM sent the provider (``additional_args.complete_input_dict`` of a failure's
    logging data) quotes overflow wording: False when the data holds none, True when the search fails."""
    extra = kwargs.get("additional_args")
    sent = extra.get("complete_input_dict") if isinstance(extra, Mapping) else None
    if not isinstance(sent, Mapping):
        return False  # nothing more than the request itself (``quoted``) to search
    try:
        return bool(await plugin.offloader.run(lambda: quotes_overflow(sent), sent, pool=True))
    except Exception:
        logger.exception("budget_hook: could not search a request for overflow wording")
        return True


async def note_overflow(plugin: Any, request_data: Any, exception: Any, *, ours: type) -> ProviderOverflow | None:
    """A provider's overflow on a call this plugin forwarded: answered as our own block would be."""
    if not isinstance(request_data, Mapping) or isinstance(exception, ours):
        return None
    records = plugin.records
    call_id = request_data.get("litellm_call_id")
    decided, record = records.decided(call_id), records.find(call_id)
    if decided is None or record is None:
        return None  # not forwarded by us
    overflow = provider_overflow(exception)
    if overflow is None:
        return None
    if await quoted(plugin, call_id):
        # the request holds overflow wording a provider may echo back: still answered as an overflow (it
        # teaches nothing: ``feedback``), but with no numbers taken from the provider's text
        overflow = Overflow(None, None, overflow.provider)
    model = request_data.get("model")
    group = model if isinstance(model, str) else ""
    answer = overflow_answer(decided.request.shape, overflow, group, request_data, decided.call_type)
    records.note_overflow(call_id, answer)
    with contextlib.suppress(Exception):  # /v1/messages renders the exception's own message: say it the same way
        exception.message = answer.spec.message
    return answer


async def remember_chain(plugin: Any, outcome: str, response_obj: Any) -> int | None:
    """A successful Responses call's chain stored (``chains.ChainStore.remember``); its size, or None."""
    chains = getattr(plugin, "chains", None)
    if outcome != "success" or chains is None:
        return None
    try:
        stored: int | None = await chains.remember(response_obj)
    except Exception:  # the store's own problem must never affect the record
        logger.exception("budget_hook: could not store a Responses chain")
        return None
    return stored


def watch_chain(plugin: Any, response: Any, route: str | None) -> Any:
    """A stream as the client gets it, with the chain of each ``response.completed`` event stored before that event
    is passed on (``async_post_call_streaming_iterator_hook``), on a Responses route (``route``: the path the proxy
    serves, None when unknown: watched); any other stream as it is. LiteLLM's success callback can miss the response
    a client receives: after an MCP tool loop on ``/v1/responses`` it carries the loop's first call, so a
    continuation of the answer the client got was counted by its new input alone (an attack review: 17,517 tokens
    reached a 16,000-token window). Never from the request's own keys, which the client writes (a review: a
    ``messages`` key LiteLLM ignores on ``/v1/responses`` turned the watch off)."""
    if getattr(plugin, "chains", None) is None or (route is not None and "responses" not in route):
        return response
    return _watched(plugin, response)


async def _watched(plugin: Any, response: Any) -> Any:
    async for chunk in response:
        if field_of(chunk, "type") == "response.completed":
            await remember_chain(plugin, "success", field_of(chunk, "response"))
        yield chunk


async def log_outcome(plugin: Any, outcome: str, kwargs: dict, response_obj: Any, *, ours: type,
                      router: Any) -> None:
    try:
        inner_id = kwargs.get("litellm_call_id")
        call_id = plugin.records.owner(inner_id)  # an adopted inner call is logged as the call the client made
        # a Responses chain is stored from the provider's response alone (its id and usage: no client writes
        # those), whatever became of the call's record: a call id a client chose (collided) or a record gone
        # must not keep the chain from being counted later
        stored = await remember_chain(plugin, outcome, response_obj)
        record = plugin.records.settle(call_id, outcome)
        if record is None:
            return  # not a request this plugin decided on
        billed = provider_prompt_tokens(response_obj, kwargs) if outcome == "success" else None
        plugin.metrics.observe(record, outcome, billed)
        decision = record.as_dict()
        entry: dict[str, Any] = {
            "event": "budget_hook.decision",
            "outcome": outcome,
            "call_id": call_id, **({"inner_call_id": inner_id} if inner_id != call_id else {}),
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
            response_id = response_obj.get("id") if isinstance(response_obj, Mapping) else \
                getattr(response_obj, "id", None)
            if isinstance(response_id, str) and len(response_id) <= MAX_RESPONSE_ID_CHARS:
                entry["response_id"] = response_id  # the id the client got: the record is findable by it too
            if stored is not None:  # a Responses chain: its size, for a later previous_response_id
                entry["chain_tokens"] = stored
            if not shared_id:
                learned = await learn_from_usage(plugin.learning, kwargs, record, billed)
        else:
            entry["error"] = describe_error(kwargs.get("exception"), with_text=record.log_content)
            if not shared_id:
                # the request is searched only for an error that reads as an overflow (the only one that teaches),
                # and so is what the provider was sent (LiteLLM's ``complete_input_dict``)
                error = kwargs.get("exception")
                overflow = parse_overflow(str(getattr(error, "message", None) or error)) if error is not None else None
                record = replace(record, quotes_overflow=overflow is None or await quoted(plugin, call_id)
                                 or await sent_quotes(plugin, kwargs))
                learned = await learn_from_error(plugin.learning, kwargs, record, ours=ours,
                                                 configured=configured_window(router, deployment_id(kwargs)))
            purge_later(plugin.records)
        if learned is not None:
            entry["learned"] = learned
        write_line(logger, bounded_line(entry))
    except Exception:  # a logging problem must never affect the response
        logger.exception("budget_hook: could not write the decision record")
