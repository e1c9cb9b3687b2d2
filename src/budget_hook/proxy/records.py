"""The one per-call state of requests in flight, by call id (pure; no LiteLLM).

Per call id: the decision record and, for a request that was forwarded, what its attempts are checked
against (``Decided``). Both live and leave together, under one eviction. Headers and log callbacks read a
request's record from here, never from request metadata, which a client can write (a forged record would
otherwise reach headers and logs). A call is kept until its success or failure callback runs, however long
a stream lasts (up to ``IN_FLIGHT_SECONDS``); after a failure it stays a little (a retry or fallback may still
come, and the proxy may ask for the error's headers afterwards).

What a call keeps of its request (``Decided.content``, ``_Call.source``) is the one part that can be large. It
holds objects LiteLLM holds anyway while the call runs, but not once the call is over, so it is let go as soon
as nothing can ask for it (``release``: the proxy answered the failure), and bounded in age and bytes over all
calls (``HELD_SECONDS``, ``HELD_BYTES``): past either, the oldest call's next attempt is decided again in full
rather than compared, and its error teaches nothing. An attempt LiteLLM makes on a call it already settled
(``settled``: a batch ``model: "a,b"`` whose second group fails) is decided without leaving a record behind.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ..budget import ModelLimits
from ..pipeline import BudgetRequest

#: records of requests in flight (the bound only guards against callbacks that never come)
IN_FLIGHT_RECORDS = 16_384
#: after a failure a record stays this long, at most this many
FAILED_RECORD_SECONDS = 30.0
FAILED_RECORDS_KEPT = 1024
#: a call still in flight this long is taken as one LiteLLM will never settle (its own default request timeout)
IN_FLIGHT_SECONDS = 6000.0
#: what calls keep of their requests, over all calls, at most this long and this many bytes (``held_size``)
HELD_SECONDS = 600.0
HELD_BYTES = 256 * 2**20

R = TypeVar("R")


@dataclass(frozen=True)
class Decided:
    """What the pre-call decision leaves for the attempts: the record object attached to the body (an
    identity no client can forge), the request without its body, the limits and fail mode it used, and
    the content fields it forwarded (by reference: an attempt on the same objects needs no new count)."""

    marker: dict[str, Any]
    request: BudgetRequest
    limits: ModelLimits
    fail_mode: str
    content: Mapping[str, Any]
    #: LiteLLM's call type and whether the client asked for a stream: how a provider's refusal is answered
    call_type: str = ""
    stream: bool = False
    #: the tokens the provider holds for the Responses chain the request continues (``chains.Chain``), counted
    #: again with each attempt's own window; None: it continues no chain the gateway knows
    chain: int | None = None
    #: the stored prompt the request names, left for the call (one the proxy's registry did not fill in before the
    #: hook: a reference the decision estimated); an attempt may carry it, and no other (``bounds.added_stored_prompt``)
    prompt_id: Any = None
    #: the output allowance the decision reserved (None: it reserved none); an attempt that asks for more (a
    #: client's ``fallbacks`` entry merged into the fallback call with its own ``max_tokens``) is decided again
    reserve: int | None = None


@dataclass
class _Call(Generic[R]):
    record: R
    decided: Decided | None = None
    #: the provider refused the forwarded request as too long: how the client is answered instead
    #: (``answers.ProviderOverflow``), set by the failure hook, read by the error handler
    overflow: Any = None
    #: the request as the pre-call hook saw it (``outcomes.snapshot``: its dicts and lists copied, what they
    #: hold shared with the request LiteLLM keeps for the call anyway), kept only until a failure asks whether
    #: it quotes overflow wording (``quoted``): asked of failures only, never walked for a request that succeeds
    source: Any = None
    #: whether the request quotes overflow wording (``learning.quotes_overflow`` of ``source``), once asked
    quoted: bool | None = None
    #: when it was remembered (``time.monotonic``), and the bytes of request it holds (``held_size``)
    since: float = 0.0
    size: int = 0

    def release(self) -> None:
        """Let go of what the call holds of its request: its next attempt is decided again in full (a field
        the decision kept nothing of counts as changed), and its error teaches nothing (``quoted`` is True)."""
        self.source = None
        if self.decided is not None and self.decided.content:
            self.decided = replace(self.decided, content={})


class RecordStore(Generic[R]):
    def __init__(self, *, in_flight: int = IN_FLIGHT_RECORDS, failed_seconds: float = FAILED_RECORD_SECONDS,
                 failed_kept: int = FAILED_RECORDS_KEPT, in_flight_seconds: float = IN_FLIGHT_SECONDS,
                 held_seconds: float = HELD_SECONDS, held_bytes: int = HELD_BYTES) -> None:
        self.in_flight = in_flight
        self.failed_seconds = failed_seconds
        self.failed_kept = failed_kept
        self.in_flight_seconds = in_flight_seconds
        self.held_seconds = held_seconds
        self.held_bytes = held_bytes
        self._records: OrderedDict[str, _Call[R]] = OrderedDict()
        self._failed: OrderedDict[str, tuple[float, _Call[R]]] = OrderedDict()
        #: the calls that hold part of their request, oldest first, and the bytes they hold together
        self._held: OrderedDict[str, _Call[R]] = OrderedDict()
        self._held_total = 0
        #: call ids whose outcome was logged (the last ``in_flight``): an attempt on one leaves no record
        self._settled: OrderedDict[str, None] = OrderedDict()
        #: call ids two requests used while one was still here: a client may set its own
        #: (``x-litellm-call-id``), so neither request's answer can be paired with its record for learning
        self._collided: OrderedDict[str, None] = OrderedDict()
        #: the call that attached each decision's marker (by the marker's id; checked by identity on use), and
        #: the inner calls LiteLLM makes for an outer one under call ids of their own (``adopt``)
        self._owners: OrderedDict[int, str] = OrderedDict()
        self._aliases: OrderedDict[str, str] = OrderedDict()

    def remember(self, call_id: Any, record: R, decided: Decided | None = None, source: Any = None,
                 size: int = 0) -> None:
        """A call's record (a new decision: what an earlier one left for attempts goes with it); ``source``:
        the request it decided, for ``quoted``; ``size``: the bytes of request both hold (``held_size``)."""
        if not isinstance(call_id, str):
            return
        if call_id in self._records or call_id in self._failed:
            self._keep(self._collided, call_id, None)
        self._settled.pop(call_id, None)
        self._unhold(call_id)
        call = self._records[call_id] = _Call(record, decided, source=source, since=time.monotonic(), size=size)
        self._records.move_to_end(call_id)
        if source is not None or (decided is not None and decided.content):
            self._held[call_id] = call
            self._held_total += size
        now = time.monotonic()
        while self._records and (len(self._records) > self.in_flight
                                 or next(iter(self._records.values())).since < now - self.in_flight_seconds):
            self._unhold(self._records.popitem(last=False)[0])
        self._bound(now)
        if decided is not None:
            self._keep(self._owners, id(decided.marker), call_id)

    def adopt(self, call_id: Any, kwargs: Mapping[str, Any]) -> bool:
        """An unknown call carrying the record object another call's decision attached (an identity no client
        can forge: a client's own ``budget_hook`` metadata is replaced by the decision's) is that call's inner
        call: LiteLLM 1.108's Gemini-route adapter makes its completion under a new call id, with the outer
        request's metadata. From now on its attempts, record and outcome are the outer call's."""
        if not isinstance(call_id, str) or self._call(call_id) is not None:
            return False
        for key in ("metadata", "litellm_metadata"):
            metadata = kwargs.get(key)
            marker = metadata.get("budget_hook") if isinstance(metadata, Mapping) else None
            owner = self._owners.get(id(marker)) if marker is not None else None
            decided = self.decided(owner) if owner is not None else None
            if owner is not None and owner != call_id and decided is not None and decided.marker is marker:
                self._keep(self._aliases, call_id, owner)
                return True
        return False

    def _own(self, call_id: Any) -> Any:
        return self._aliases.get(call_id, call_id) if isinstance(call_id, str) else call_id

    def owner(self, call_id: Any) -> Any:
        """The call id the client saw for this call (the outer call of an adopted inner one; else itself)."""
        return self._own(call_id)

    def update(self, call_id: Any, record: R) -> None:
        """A new version of a call's record (an attempt noted), keeping what it left for attempts; a failed
        call an attempt comes back to (a fallback) is in flight again."""
        call_id = self._own(call_id)
        call = self._records.get(call_id)
        if call is None and call_id in self._failed:
            failed = self._failed.pop(call_id)[1]
            self.remember(call_id, failed.record, failed.decided, failed.source, failed.size)
            call = self._records[call_id]
            call.quoted = failed.quoted
        if call is not None:
            call.record = record

    def _call(self, call_id: Any) -> _Call[R] | None:
        call_id = self._own(call_id)
        call = self._records.get(call_id)
        if call is None and call_id in self._failed:
            call = self._failed[call_id][1]
        return call

    def collided(self, call_id: Any) -> bool:
        """Another request used this call id while this one was in flight (or had just failed)."""
        return isinstance(call_id, str) and call_id in self._collided

    def find(self, call_id: Any) -> R | None:
        call = self._call(call_id)
        return call.record if call is not None else None

    def decided(self, call_id: Any) -> Decided | None:
        """What the call's pre-call decision left for its attempts (None: blocked, failed or unknown)."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        return call.decided if call is not None else None

    def unasked(self, call_id: Any) -> tuple[bool, Any]:
        """Whether the call's request quotes overflow wording is not known yet, and the request to ask
        (None: none kept: an unknown call, a block, the plugin's own failure; ``quoted`` then says True)."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        return (call is not None and call.quoted is None and call.source is not None,
                call.source if call is not None else None)

    def answer_quoted(self, call_id: Any, quotes: bool) -> None:
        """The answer to ``unasked``: kept with the call, and the request let go."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        if call is not None and call.quoted is None:
            call.quoted, call.source = quotes, None

    def quoted(self, call_id: Any) -> bool:
        """Whether the call's request quotes overflow wording (``answer_quoted``); True when that was never
        answered: an error that may echo the client teaches nothing."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        return call is None or call.quoted is not False

    def note_overflow(self, call_id: Any, answer: Any) -> None:
        """The provider refused this forwarded call as too long: ``answer`` is how its client is answered."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        if call is not None:
            call.overflow = answer

    def overflow(self, call_id: Any) -> Any:
        """How a call the provider refused as too long is answered (None: not such a call)."""
        call = self._call(call_id) if isinstance(call_id, str) else None
        return call.overflow if call is not None else None

    def settle(self, call_id: Any, outcome: str) -> R | None:
        """The record for a finished call. A success is final; a failure keeps it for a little while."""
        call_id = self._own(call_id)
        call = self._records.pop(call_id, None)
        self._mark_settled(call_id)
        if outcome == "success":
            self._unhold(call_id)  # a success asks nothing of the request
            failed = self._failed.pop(call_id, None)
            return call.record if call is not None else (failed[1].record if failed else None)
        if call is None:
            return self._failed[call_id][1].record if call_id in self._failed else None
        self._failed[call_id] = (time.monotonic(), call)
        self.purge()
        return call.record

    def purge(self) -> None:
        """Forget failed records older than ``failed_seconds`` (and any beyond ``failed_kept``). Runs on every
        failure and on a timer the adapter sets, so a quiet gateway does not keep them either."""
        now = time.monotonic()
        while self._failed and (len(self._failed) > self.failed_kept
                                or next(iter(self._failed.values()))[0] < now - self.failed_seconds):
            call_id, (_, call) = self._failed.popitem(last=False)
            if self._held.get(call_id) is call:  # not a newer call that reused its id
                self._unhold(call_id)
        self._bound(now)

    def settled(self, call_id: Any) -> bool:
        """The call's outcome was logged and no request has used its id since: an attempt LiteLLM makes on it
        after that (a batch ``model: "a,b"`` whose second group fails) gets no callback that would end it."""
        return isinstance(call_id, str) and call_id in self._settled and self._call(call_id) is None

    def forget(self, call_id: Any) -> None:
        """The record an attempt on a settled call left (``settled``): gone at once, the call settled again."""
        call_id = self._own(call_id)
        if isinstance(call_id, str) and self._records.pop(call_id, None) is not None:
            self._unhold(call_id)
            self._mark_settled(call_id)

    def _mark_settled(self, call_id: Any) -> None:
        if isinstance(call_id, str):
            self._keep(self._settled, call_id, None)

    def _keep(self, table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        """``key`` -> ``value`` as the newest entry of ``table``, whose oldest go past ``in_flight`` entries."""
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.in_flight:
            table.popitem(last=False)

    def release(self, call_id: Any) -> None:
        """Nothing will ask for this call's request any more (the proxy answered its failure): what the call
        holds of it is let go, the record stays (its headers and overflow answer may still be asked for)."""
        self._unhold(self._own(call_id))

    def held(self) -> tuple[int, int, int]:
        """How many calls are in flight (or just failed), how many hold part of their request, and how many
        bytes (``held_size``) they hold."""
        return len(self._records) + len(self._failed), len(self._held), self._held_total

    def _unhold(self, call_id: Any) -> None:
        call = self._held.pop(call_id, None)
        if call is not None:
            self._held_total -= call.size
            call.release()

    def _bound(self, now: float) -> None:
        """The oldest calls let go of their requests while the calls hold more than ``held_bytes`` together,
        or held them longer than ``held_seconds``."""
        while self._held and (self._held_total > self.held_bytes
                              or next(iter(self._held.values())).since < now - self.held_seconds):
            self._unhold(next(iter(self._held)))

    def in_flight_ids(self) -> list[str]:
        return list(self._records)

    def failed_ids(self) -> list[str]:
        return list(self._failed)


#: where LiteLLM keeps guardrail results in a request's metadata: the one place its 1.108 still logs for a request
#: refused before any provider call (``tags`` aside), into ``standard_logging_object.guardrail_information`` and
#: the spend-log row's ``metadata.guardrail_information``
GUARDRAIL_KEY = "standard_logging_guardrail_information"


def attach_record(data: dict, key: str, record: Any, name: str = "budget_hook") -> dict[str, Any]:
    """The record under ``<key>.budget_hook`` and ``<key>.spend_logs_metadata.budget_hook`` (without any
    content: spend logs are stored); a block's also as a guardrail result (``GUARDRAIL_KEY``: status
    ``guardrail_intervened``, the record under its ``budget_hook`` key), which LiteLLM 1.108 still logs for a
    request refused before any provider call where it drops ``spend_logs_metadata``. A fresh metadata dict: the
    client's own metadata object is never mutated."""
    metadata = dict(data.get(key) or {}) if isinstance(data.get(key), Mapping) else {}
    spend = metadata.get("spend_logs_metadata")
    spend = dict(spend) if isinstance(spend, Mapping) else {}
    attached: dict[str, Any] = record.as_dict()
    # the same facts without any dropped content (made once: the usual record holds none)
    spend[name] = record.as_dict(content=False) if "dropped_content" in attached else dict(attached)
    metadata["spend_logs_metadata"] = spend
    if getattr(record, "action", None) == "blocked":
        earlier = metadata.get(GUARDRAIL_KEY)
        # other guardrails' results stay; an entry in our name a client wrote does not
        kept = [g for g in earlier if isinstance(g, Mapping) and g.get("guardrail_name") != name] \
            if isinstance(earlier, list) else []
        metadata[GUARDRAIL_KEY] = [*kept, {"guardrail_name": name, "guardrail_provider": name,
                                           "guardrail_mode": "pre_call", "guardrail_status": "guardrail_intervened",
                                           name: spend[name]}]
    metadata[name] = attached
    data[key] = metadata
    return attached
