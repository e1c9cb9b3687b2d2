"""Every attempt: the request checked again against the deployment the router chose (pure; no LiteLLM).

The pre-call hook budgets against the group the client named; the router may then send the same body to
another deployment: a retry, a fallback to another group, an alias or wildcard resolved later. LiteLLM
calls ``async_pre_call_deployment_hook`` for each attempt, and the adapter hands it to ``recheck``:

* an attempt no pre-call decision covers (a router pass-through, a route that skips the pre-call hook) is
  decided as the pre-call hook would (``route_guard.undecided_attempt``);
* when the attempt's deployment has the window the first decision used (``records.Decided``), and the body
  is the one forwarded, the first decision stands;
* otherwise the attempt is decided again against its own window and policy: forwarded as is, trimmed, or
  refused with the context-window error the router understands (``overflow_error``, LiteLLM's class,
  passed in), and noted in the record's ``attempts``.

The plugin is duck-typed (``settings``, ``records``, ``offloader``, ``deployment_windows``, ``learning``,
``model_limits``, ``litellm_rewrite``, ``async_pre_call_hook``); ``router`` returns LiteLLM's router, or None.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from itertools import chain, compress
from typing import Any, cast

from ..budget import THINKING_FIELDS, ModelLimits, requested_output_tokens
from ..budget.router_windows import with_client_headers
from ..counting.rendered import PROMPT_FIELDS
from ..counting.template_input import TEMPLATE_FIELDS
from ..errors import MalformedRequestError
from ..pipeline import Decision, decide, decision_weight
from ..pipeline.bounds import added_prompt_parameter, added_stored_prompt, is_gateway_retry_policy
from ..pipeline.decider import output_asked
from ..shapes import SHAPES
from .chains import Chain, chained
from .errors import block_error, internal_error, prompt_parameter_error
from .feedback import deployment_id
from .labels import labelled
from .offload import OTHER_CHARS_PER_CHAR, other_size
from .outcomes import log_internal
from .route_guard import as_lists, attempt_deployment, on_a2a_route, router_metadata_key, undecided_attempt
from .windows import covers, deployment_params

logger = logging.getLogger("budget_hook")
#: how many attempts a record keeps (the last ones)
ATTEMPTS_KEPT = 10


async def recheck(plugin: Any, kwargs: dict[str, Any], call_type: Any, *, router: Callable[[], Any],
                  error_type: type[Exception], overflow_error: Callable[[str, str], Exception]
                  ) -> dict[str, Any] | None:
    """The kwargs this attempt sends instead (None: as they are); a refusal raises."""
    call_type = getattr(call_type, "value", call_type)
    shape = SHAPES.for_call_type(call_type)
    call_id = kwargs.get("litellm_call_id")
    decided = plugin.records.decided(call_id)
    if decided is None and plugin.records.adopt(call_id, kwargs):  # an outer call's inner completion
        decided = plugin.records.decided(call_id)

    def own() -> Mapping[str, Any]:  # what the operator set on the attempt's deployment
        return deployment_params(router(), deployment_id(kwargs))
    if shape is None or decided is None:  # a router pass-through, a route that skips the pre-call hook
        settled = plugin.records.settled(call_id)  # LiteLLM's attempt on a call it already logged: no callback
        try:  # will end the record this decision leaves
            return await undecided_attempt(plugin, kwargs, call_type, error_type, own)
        finally:
            if settled:
                plugin.records.forget(call_id)
    # a client's prompt parameter that reached the attempt by a way the pre-call check does not read (a fallback
    # target in the router's format, a settings override): LiteLLM would write its text after this hook
    added = added_prompt_parameter(kwargs, own) or added_stored_prompt(kwargs, decided.prompt_id, own)
    if added is not None:
        raise error_type(prompt_parameter_error(added))
    try:
        # no router metadata on the call (LiteLLM's generateContent adapter makes its inner completion without
        # it): a deployment of the group first decided for, under that decision's limits
        group, limits = cast(tuple[str, ModelLimits], attempt_limits(
            plugin, kwargs, router_metadata_key(call_type), (decided.request.model_group, decided.limits)))
        if limits.beta_window is not None:  # the window the request's own headers leave (not the deployment's own,
            params = own()                  # which the router merged into the call)
            limits = with_client_headers(limits, {k: v for k, v in kwargs.items()
                                                  if k not in ("extra_headers", "headers") or v != params.get(k)})
        # the chain this attempt continues: the request's, or another one a ``fallbacks`` entry's own
        # ``previous_response_id`` put in its place (LiteLLM merges the entry into the fallback call), the larger
        found = await plugin.chains.lookup(shape, kwargs)
        held = decided.chain
        if found is not None and found.held is not None and (held is None or found.held > held):
            held = found.held

        def same_content() -> bool:
            return all(unchanged(kwargs.get(f), decided.content.get(f)) for f in compared_fields(shape))
        # a large content (a million token ids, 300,000 parts) is compared in the pool, as it was decided there
        large = sum(len(nodes[0]) for nodes in decided.content.values()) > INLINE_NODES
        same = await plugin.offloader.run(same_content, kwargs, pool=True) if large else same_content()
        if same and held == decided.chain and covers(limits, decided.limits) \
                and not asks_more_output(shape, kwargs, limits, decided.reserve, own):
            return None  # nothing differs: the first decision holds for this deployment
        # in the attempt's own format: LiteLLM may have translated the body on the way (a /v1/messages call to
        # an OpenAI deployment reaches it as a Responses call)
        request = labelled(router(), replace(decided.request, shape=shape, body=kwargs, model_group=group,
                                             limits=limits, client_body=False, held=held or 0))

        def decide_attempt() -> Decision:  # a fallback to Claude gets what LiteLLM writes there (in the pool too)
            body = plugin.litellm_rewrite(shape, as_lists(kwargs, shape.content_fields), limits)
            return decide(request if body is kwargs else replace(request, body=body), plugin.settings)
        decision = await plugin.offloader.run(decide_attempt, kwargs, weight=decision_weight(limits))
        # the Responses chain the provider holds (``BudgetRequest.held``) counted against this attempt's window too
        decision = chained(decision, Chain(held) if held is not None else None)
    except Exception as exc:  # the plugin's own failure, per the fail mode of the first decision
        log_internal(exc, kwargs, decided.fail_mode, decided.request, router())
        if decided.fail_mode == "closed":
            raise error_type(internal_error(call_id)) from None
        return None
    note_attempt(plugin.records, call_id, decision.model_group, decision)
    if decision.action == "blocked":
        raise overflow_error(block_error(decision, shape).message, str(kwargs.get("model")))
    return None if decision.request is kwargs else dict(decision.request)


def lasting_refusal(kwargs: dict[str, Any], call_type: Any, refusal: Exception, *, retries: Any,
                    router_call: Callable[..., bool] | None = None,
                    client_error: Callable[[str, str, bool], Exception] | None = None) -> dict[str, Any]:
    """The kwargs a refused attempt is sent with when LiteLLM would call again without the hooks, so that every
    such call raises ``refusal`` before anything is sent (LiteLLM raises a ``mock_response`` that is an exception);
    otherwise ``refusal`` is raised. LiteLLM 1.103's client wrapper answers the refusal of a completion whose
    ``metadata`` names no ``model_group`` (its /v1/messages and /v1/responses bridges' inner call) by calling the
    unwrapped function again, with these kwargs: for ``num_retries`` (``retries``: the operator's
    ``litellm_settings`` one, when the call sets none), a ``retry_policy``, and a ``context_window_fallback_dict``
    (an attack review sent a refused 12,014-token body to an 8,000-token window twice). The ``retry_policy`` the
    gateway sets on what it forwards (``bounds.is_gateway_retry_policy``) grants none, and is read first: a call that
    carries it is not sent again for its retries. A Responses call cannot carry a refusal (LiteLLM raises no
    exception given as its ``mock_response``): its refusal is raised, and a WARNING says when LiteLLM will send it
    again (a call the gateway's policy does not reach). ``router_call``: LiteLLM's own test of a
    router call (1.108's ``utils._is_litellm_router_call``, which reads ``litellm_metadata`` too: it calls none of
    these again); None: 1.103's, ``metadata`` alone. ``client_error``: LiteLLM's client errors (``bridge_refusal``)."""
    if client_error is not None:
        refusal = bridge_refusal(refusal, kwargs, client_error)
    try:
        routed = router_call(kwargs, is_async=True) if router_call is not None \
            else "model_group" in (kwargs.get("metadata") or {})
    except TypeError:
        routed = False
    policy = kwargs.get("retry_policy")
    again = kwargs.get("context_window_fallback_dict") or (not is_gateway_retry_policy(policy) and (
        policy or kwargs.get("num_retries") or (kwargs.get("num_retries") is None and retries)))
    kind = getattr(call_type, "value", call_type)
    if kind == "aresponses" and again and not routed:
        # LiteLLM raises no exception given as a Responses call's ``mock_response``: it will send this call again
        # without the hooks (``docs/security.md``: retries belong in ``router_settings``, which the hooks see)
        logger.warning("budget_hook: LiteLLM will send this refused Responses call again without the gateway's check "
                       "(num_retries=%s on the deployment or in litellm_settings); set num_retries in router_settings "
                       "instead", kwargs.get("num_retries", retries))
    if kind != "acompletion" or routed or not again:
        raise refusal
    return {**kwargs, "mock_response": refusal}


def bridge_refusal(refusal: Exception, kwargs: Mapping[str, Any], client_error: Callable[[str, str, bool], Exception]
                   ) -> Exception:
    """A refusal of the call LiteLLM's A2A completion bridge makes, as the error its A2A endpoint answers with an HTTP
    400 and a JSON-RPC error (``client_error(message, model, overflow)``: LiteLLM's ``BadRequestError``, or its
    context-window subclass for an overflow), where it answers any other class as an internal error (HTTP 500). Any
    other refusal, or one that is ours to answer as a 5xx, as it is."""
    status = getattr(refusal, "status_code", None)
    if not (isinstance(status, int) and status < 500 and on_a2a_route()):
        return refusal
    return client_error(str(getattr(refusal, "message", refusal)), str(kwargs.get("model")),
                        getattr(refusal, "error_code", None) == "context_length_exceeded")


#: an attempt whose decided content holds more objects than this is compared in the pool (~1 ms of walk)
INLINE_NODES = 20_000
#: objects walked or compared per C call (~0.2 ms): the pool thread holds the GIL no longer than that at a time
CHUNK = 4096
_CONTAINER = frozenset({dict, list}).__contains__
_DICT = frozenset({dict}).__contains__
#: how much of the rest of a request ``held_size`` walks (``offload.other_size`` units: ~1 MB of text)
OTHER_HELD = 2**16
Nodes = tuple[tuple[Any, ...], tuple[int, ...]]


def content_nodes(value: Any, limit: int | None = None) -> Nodes | None:
    """Every object inside a content field, level by level (a dict's keys and values, a list's items), held by
    reference, and the size of every dict and list: what the decision counted. LiteLLM's guardrails edit the
    request in place after the pre-call hook (a masking content filter writes ``[KEYWORD_REDACTED]`` over each
    blocked word: 3,000 tokens became 24,000 in the very same list and dicts), so the attempt compares these,
    not only the containers. A list at the top is not itself compared (the router rebuilds ``tools`` as a new
    list of the same items on every attempt: ``Router._merge_tools_from_deployment``), its items are. The walk
    is C (``gc.get_referents``, ``map``, ``compress``), ``CHUNK`` objects a call so that a walk in the pool
    lets the event loop run between calls: ~0.3 ms for a 226k-token history of 1,051 messages. None once it
    holds more than ``limit`` objects."""
    level = value if type(value) is list else [value]
    nodes: list[Any] = []
    sizes = [len(level)]
    for start in range(0, len(level), CHUNK):
        nodes += level[start:start + CHUNK]
    while level:
        below: list[Any] = []
        for start in range(0, len(level), CHUNK):
            piece = level[start:start + CHUNK]
            containers = list(compress(piece, map(_CONTAINER, map(type, piece))))
            if containers:
                sizes += map(len, containers)
                nodes += chain.from_iterable(compress(containers, map(_DICT, map(type, containers))))  # keys
                refs = gc.get_referents(*containers)  # a dict's values (and keys that are not str), a list's items
                nodes += refs
                below += refs
            if limit is not None and len(nodes) > limit:
                return None
        level = below
    return tuple(nodes), tuple(sizes)


def compared_fields(shape: Any) -> tuple[str, ...]:
    """What an attempt must carry as decided for the decision to stand: the shape's content fields, what a
    self-hosted server's chat template reads besides (``TEMPLATE_FIELDS``, also under ``extra_body``) and the
    fields LiteLLM writes into the prompt (``PROMPT_FIELDS``: Cohere's ``preamble``...), which a client's
    ``fallbacks`` entry can change for the fallback call alone (LiteLLM merges the entry into it)."""
    return tuple(dict.fromkeys((*shape.content_fields, *TEMPLATE_FIELDS, *PROMPT_FIELDS, "extra_body")))


def reserved_output(decision: Decision) -> int | None:
    """The output allowance ``decision`` reserved, None when it reserved none (no budget was computed)."""
    if decision.report is not None and decision.report.budget is not None:
        return decision.report.budget.output_reserve
    reserve = (decision.input_budget or {}).get("output_reserve")
    return reserve if isinstance(reserve, int) else None


def asks_more_output(shape: Any, kwargs: Mapping[str, Any], limits: ModelLimits, reserved: int | None,
                     own: Callable[[], Mapping[str, Any]]) -> bool:
    """Does the attempt ask for more output than the decision reserved, or for an allowance it cannot read? Read on
    the attempt's own fields (``decider.output_asked``), which a client's ``fallbacks`` entry may have changed (10,000
    sent where 100 was reserved), but not on those the deployment's own parameters set (``own``: the decision's
    limits reserved those, and an operator's odd value, such as Ollama's ``max_tokens: -1``, is no client's to fix).
    A shape that reserves no output (embeddings) never asks."""
    if reserved is None or not getattr(shape, "reserves_output", True):
        return False
    operator = own()
    fields = {name.split(".")[0] for name in shape.output_token_fields} | {*THINKING_FIELDS, "extra_body"}
    asked_for = {name: value for name, value in kwargs.items()
                 if name not in fields or name not in operator or operator[name] != value}
    try:
        if shape.kind == "conversation":
            asked, _ = output_asked(asked_for, shape, limits)
        else:  # a prompt's allowance is its own (``decide_inputs`` fills none in)
            asked = requested_output_tokens(asked_for, shape.output_token_fields)
    except MalformedRequestError:
        return True  # decided again: the client learns which field
    return (asked or 0) > reserved


def content_snapshot(fields: Iterable[str], request: Mapping[str, Any]) -> dict[str, Nodes]:
    """``content_nodes`` of each of ``fields`` (``compared_fields``) of the request a decision forwards."""
    return {field: cast(Nodes, content_nodes(request.get(field))) for field in fields}


def held_size(content: Mapping[str, Nodes], data: Mapping[str, Any]) -> int:
    """About how many bytes of request a call keeps (``records.HELD_BYTES``): the text of its decided content
    (``content_snapshot``) and 8 bytes per object in it, and the rest of the request as ``offload.other_size``
    weighs it, up to ``OTHER_HELD`` (a client's own fields are kept for ``outcomes.quoted`` too)."""
    size = 0
    for nodes, _ in content.values():
        size += 8 * len(nodes) + sum([len(node) for node in nodes if type(node) is str])
    return size + OTHER_CHARS_PER_CHAR * other_size(data, OTHER_HELD)


def unchanged(sent: Any, decided: Nodes | None) -> bool:
    """The attempt carries what the first decision counted for this field (``content_nodes``; None: the decision
    had no such field, the attempt is in another format): the very same objects in the same places. A
    deployment's own ``litellm_params.tools`` merged in makes the list longer, a guardrail's edit or a translated
    body holds new objects: either is decided again. Identity, never equality: the objects are the ones decided
    on, so the count cannot differ, and the check costs one walk of pointer comparisons (a string replaced in
    place is a new object: strings are immutable), never longer than the decided one."""
    if decided is None:
        return False
    walked = content_nodes(sent, len(decided[0]))
    if walked is None or walked[1] != decided[1] or len(walked[0]) != len(decided[0]):
        return False
    nodes, held = walked[0], decided[0]
    return all(all(map(operator.is_, nodes[i:i + CHUNK], held[i:i + CHUNK])) for i in range(0, len(nodes), CHUNK))


def attempt_limits(plugin: Any, kwargs: Mapping[str, Any], key: str = "metadata",
                   fallback: tuple[str, ModelLimits] | None = None) -> tuple[str, ModelLimits] | None:
    """The group and limits of the deployment this attempt goes to (``route_guard.attempt_deployment``: ``key``, where
    the router writes for the call, else ``fallback``; the other key may only lower the window)."""
    return attempt_deployment(plugin, kwargs, key, fallback)


def note_attempt(records: Any, call_id: Any, group: str, decision: Decision) -> None:
    """The attempt in its call's record (the last ``ATTEMPTS_KEPT``)."""
    record = records.find(call_id)
    if record is None:
        return
    attempt = {"model_group": group, "window": decision.limits.window, "action": decision.action,
               "tokens_before": decision.tokens_before, "tokens_after": decision.tokens_after}
    records.update(call_id, dataclasses.replace(record, attempts=(*record.attempts, attempt)[-ATTEMPTS_KEPT:],
                                                decided_again=record.decided_again + 1))
