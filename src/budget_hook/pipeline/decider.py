"""Decide one request: resolve the policy, count, budget, trim or block (pure; no I/O, no LiteLLM).

Contract: ``decide(request, settings)`` takes the one complete ``BudgetRequest`` the adapter built and
returns a frozen ``Decision``. It never raises for anything a client sends: a request that cannot fit,
whose own ``max_tokens`` leaves no room, that is malformed, or whose client input to the gateway is
invalid comes back as ``action="blocked"`` with the error message and its facts, so the adapter alone
turns it into an HTTP error (and shadow mode can log what *would* have happened). Only the plugin's own
failures (a bug, a tokenizer that cannot load) raise, as ``InternalFailure`` carrying the fail mode
the operator chose for this request.

Steps, each going down a layer, never back up:

1. policy: config layers, then admin metadata (``policy``), then the client's cap (it may only tighten);
2. the window: the group's limits, or the policy's default / a block when unknown;
3. the shape's own decision: conversations are counted and trimmed on their view, per-input shapes are
   checked input by input.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..budget import (
    ModelLimits,
    compute_budget,
    requested_output_tokens,
    safety_margin,
    thinking_output_tokens,
    with_output_tokens,
)
from ..budget.router_windows import with_client_headers
from ..counting import TokenCounter, resolve_tokenizer, templated
from ..counting.corrected import corrected, with_overhead
from ..counting.counter import FAMILY_ENCODINGS
from ..errors import (
    BudgetHookError,
    CannotFitError,
    ContextBudgetError,
    MalformedRequestError,
    OutputReserveTooLargeError,
    PolicyError,
)
from ..learning import Calibration, count_band, needs_provider_count
from ..policy import PluginSettings, ResolvedPolicy, load_metadata_layer
from ..shapes import ConversationShape, InputsShape
from ..shapes.chat import SHAPE as CHAT
from ..shapes.inputs import check_inputs, shared_tokens
from ..trimming.elsewhere import TrimElsewhere
from .bounds import body_problem
from .decision import Action, BlockKind, BlockReason, Decision, shadowed
from .privacy import shown_problem
from .request import BudgetRequest, Caller


class InternalFailure(BudgetHookError):
    """The plugin's own failure while deciding (never a client's doing); ``fail_mode`` says what to do."""

    def __init__(self, cause: BaseException, fail_mode: str) -> None:
        self.cause = cause
        self.fail_mode = fail_mode
        super().__init__(f"{type(cause).__name__}: {cause}")


def counter_for(limits: ModelLimits) -> TokenCounter:
    """The counter of the model the group's limits say counts it."""
    counter = TokenCounter.for_model(limits.counting_model, base_model=limits.base_model)
    _LOADED.add(counter.profile.encoding_name)
    return counter


#: the vocabularies this process's counters use, loaded (a handful of names; ``decision_weight``)
_LOADED: set[str] = set()
#: the weight of a decision whose vocabulary is not loaded yet: loading one takes 0.3-2.1 s (Mistral's the longest;
#: an attack review, 2026-12-06, stalled a worker's event loop that long with one request naming it)
FIRST_LOAD_WEIGHT = 1 << 30


def _vocabulary(model: str, base_model: str | None) -> str:
    """The vocabulary a model's counter uses, found without loading it (an operator-configured tokenizer's by
    building its counter, which start-up has loaded)."""
    if any(templated.lookup(name) is not None for name in (base_model, model)):
        return TokenCounter.for_model(model, base_model=base_model).profile.encoding_name
    return _family_vocabulary(model, base_model)


@functools.lru_cache(maxsize=1024)
def _family_vocabulary(model: str, base_model: str | None) -> str:
    return resolve_tokenizer(model, base_model=base_model).encoding_name


#: vocabularies that cost about 10x tiktoken per character to count (DeepSeek's through ``tokenizers``, Mistral's
#: through SentencePiece: 0.5-0.7 us per character of prose, 1.2-3.9 us of symbols, against tiktoken's 0.05 and 0.5)
SLOW_ENCODINGS = frozenset({"deepseek", "mistral"})
#: how many times tiktoken's cost per character their decision weighs in the thread pool's choice
SLOW_WEIGHT = 16


def decision_weight(limits: ModelLimits) -> int:
    """How many times tiktoken's cost per character deciding against ``limits`` pays (the offloader's ``weight``);
    ``FIRST_LOAD_WEIGHT`` until its vocabulary is loaded (it is then loaded in the pool, not on the loop). By the
    vocabulary, not the model: a decision made before any count (``mode: off``, a malformed field) loads none."""
    name = _vocabulary(limits.counting_model, limits.base_model)
    if name not in _LOADED:
        return FIRST_LOAD_WEIGHT
    return SLOW_WEIGHT if name in SLOW_ENCODINGS else 1


def estimate(request: BudgetRequest) -> int:
    """Our uncorrected count of the request's body as the client sent it (what a provider's count of the
    same body is compared with)."""
    counter = counter_for(request.limits)
    shape = request.shape
    assert isinstance(shape, (ConversationShape, InputsShape))
    return int(shape.count(request.body, counter))


def operator_policy(request: BudgetRequest, settings: PluginSettings) -> ResolvedPolicy:
    """The operator's policy for the request: config layers, then admin team/key metadata. No client input
    is read here, so nothing a client sends can change the mode or the fail mode."""
    return caller_policy(request.model_group, request.limits, request.caller, settings)


def caller_policy(model_group: str, limits: ModelLimits, caller: Caller, settings: PluginSettings) -> ResolvedPolicy:
    """The operator's policy for ``caller`` on ``model_group`` (what ``operator_policy`` reads of a request)."""
    layers = settings.layers
    resolved = layers.resolve(model_group=model_group, routed_groups=limits.routed_groups,
                              team_id=caller.team_id, key_hash=caller.key_hash,
                              team_alias=caller.team_alias if settings.match_team_alias else None,
                              key_alias=caller.key_alias if settings.match_key_alias else None)
    if settings.metadata_policy == "ignore":
        return resolved
    trust = settings.metadata_policy == "trust"
    for label, metadata in (("team_metadata", caller.team_metadata), ("key_metadata", caller.key_metadata)):
        if not isinstance(metadata, Mapping) or "budget_hook" not in metadata:
            continue
        try:
            layer = load_metadata_layer(metadata["budget_hook"], where=f"{label}.budget_hook")
        except PolicyError as exc:
            # Broken admin metadata must not switch enforcement off: skip that layer, keep the rest.
            # setting names, never values: key owners write their keys' metadata (a value may be anything)
            resolved = resolved.with_warning(f"{label}.budget_hook ignored: not a valid budget_hook settings "
                                             f"object (a setting unknown or of the wrong type, among: "
                                             f"{setting_names(metadata['budget_hook'])})")
            del exc
            continue
        resolved = layers.with_metadata(resolved, layer, label=label, trust=trust)
    return resolved


def setting_names(layer: Any) -> str:
    """The keys of a metadata layer as a record may show them: a setting-like name as is, anything else
    (which a key owner may have written) as a hash."""
    if not isinstance(layer, Mapping):
        return f"a {type(layer).__name__}, not an object"
    shown = [str(k) if isinstance(k, str) and 0 < len(k) <= 40 and k.isascii() and k.replace("_", "a").isalpha()
             and k.islower() else
             f"(sha256 {hashlib.sha256(str(k).encode()).hexdigest()[:12]})" for k in list(layer)[:10]]
    return ", ".join(shown) + (f" and {len(layer) - 10} more" if len(layer) > 10 else "")


def decide(request: BudgetRequest, settings: PluginSettings) -> Decision:
    """The decision for one request (see the module's contract)."""
    fail_mode = settings.base_fail_mode
    try:
        limits = with_client_headers(request.limits, request.body)  # what the request's own headers leave it
        if limits is not request.limits:
            request = replace(request, limits=limits)
        resolved = operator_policy(request, settings)
        fail_mode = resolved.policy.fail_mode
        group = request.shown_group or request.model_group  # what messages and the record call it
        context = _Context(request.body, group, request.limits, resolved)
        if resolved.policy.mode == "off":
            return context.decision("skipped")
        client = request.client
        if client.problem is not None and resolved.policy.mode == "enforce":
            problem = client.problem
            return context.blocked(BlockReason("malformed", problem.message, {"field": problem.param},
                                               param=problem.param))
        if client.problem is not None:
            resolved = resolved.with_warning(f"client input ignored in shadow mode: {client.problem.message}")
        else:
            resolved = resolved.with_client_cap(client.max_input_tokens, client.ignored)
        shape = request.shape
        unvouched = body_problem(request.body, shape.content_fields + shape.output_token_fields,
                                 client_body=request.client_body, prompt_fields=shape.prompt_fields)
        if unvouched is not None:
            context = _Context(request.body, group, request.limits, resolved)
            return context.blocked(_malformed(unvouched))
        counter = counter_for(request.limits)
        if request.shown_group is not None:  # the counter's model is named in messages: not the client's text
            counter = copy.copy(counter)
            counter.model = request.shown_group
        if isinstance(shape, InputsShape):
            return decide_inputs(request.body, model_group=group, limits=request.limits,
                                 resolved=resolved, counter=counter, shape=shape)
        assert isinstance(shape, ConversationShape)
        return decide_conversation(request.body, model_group=group, limits=request.limits,
                                   resolved=resolved, counter=counter, shape=shape,
                                   calibration=request.calibration, held=request.held)
    except TrimElsewhere:
        raise  # not a failure: the caller decides the request again on another thread
    except Exception as exc:  # a bug of ours: never blamed on the client, handled per the fail mode
        raise InternalFailure(exc, fail_mode) from exc


@dataclass
class _Context:
    """What every decision on one request shares, and the facts gathered on the way (warnings)."""

    request: Mapping[str, Any]
    model_group: str
    limits: ModelLimits
    resolved: ResolvedPolicy
    warnings: list[str] = field(default_factory=list)
    calibration: Calibration = field(default_factory=Calibration)
    count: Mapping[str, Any] | None = None
    unseen: bool = False

    def decision(self, action: Action, *, request: Mapping[str, Any] | None = None, **facts: Any) -> Decision:
        return Decision(action=action, mode=self.resolved.policy.mode, model_group=self.model_group,
                        limits=self.limits, resolved=self.resolved,
                        request=self.request if request is None else request, warnings=tuple(self.warnings),
                        calibration=self.calibration, count=self.count, unseen=self.unseen, **facts)

    def blocked(self, block: BlockReason, **facts: Any) -> Decision:
        return self.decision(shadowed("blocked", self.resolved.policy.mode), block=block, **facts)

    def start(self) -> tuple[int, Decision | None]:
        """The window to budget against, and an early answer: the mode is off, or the window is unknown
        and the policy blocks such requests. An unknown window otherwise becomes the policy's default."""
        policy = self.resolved.policy
        if policy.mode == "off":
            return 0, self.decision("skipped")
        if self.limits.window is not None:
            return self.limits.window, None
        if policy.unknown_window == "block":
            message = (
                f"model group {self.model_group!r}: its context window is unknown (not in the router's "
                f"model_info, not in litellm's model map), and the gateway's policy blocks such requests. Ask "
                f"the gateway operator to set model_info.max_input_tokens for this model group."
            )
            return 0, self.blocked(BlockReason("unknown_window", message, {"model_group": self.model_group}))
        self.warnings.append(f"context window of {self.model_group!r} unknown; assumed default_max_input_tokens="
                             f"{policy.default_max_input_tokens}")
        self.limits = replace(self.limits, window=policy.default_max_input_tokens,
                              source="policy default (window unknown)")
        return policy.default_max_input_tokens, None


def _malformed(exc: MalformedRequestError) -> BlockReason:
    return BlockReason("malformed", f"invalid request: {exc}", {"field": exc.field}, param=exc.field)


def decide_conversation(
    request: Mapping[str, Any],
    *,
    model_group: str,
    limits: ModelLimits,
    resolved: ResolvedPolicy,
    counter: TokenCounter,
    shape: ConversationShape = CHAT,
    calibration: Calibration | None = None,
    held: int = 0,
) -> Decision:
    """Decide on a conversation request (chat by default, or any ``ConversationShape``).

    ``calibration`` multiplies every count (a learned correction, or the provider's count of this very
    request over our estimate of it); the decision says when asking the provider could change it. ``held``: tokens
    the provider holds before the request's input (``BudgetRequest.held``), in every count, never trimmed: the new
    input is trimmed to what the chain leaves."""
    policy = resolved.policy
    calibration = calibration or Calibration()
    context = _Context(request, model_group, limits, resolved, calibration=calibration,
                       count=count_facts(counter, calibration))
    counter = corrected(counter, calibration.factor, calibration.label() or "")
    counter = with_overhead(counter, held)  # the provider's own billing of it: not scaled by a correction
    window, early = context.start()
    if early is not None:
        return early
    references = shape.references(request)
    unreadable = [*((path, why) for path, why, _ in references), *shape.unreadable(request)]
    if unreadable:
        context.unseen = True
        path, why = unreadable[0]
        if policy.unreadable_content == "block":
            message = (f"{path}: {why}, so the gateway cannot check it against the context budget, and its policy "
                       f"blocks such requests; send the content inline")
            return context.blocked(BlockReason("unreadable", message, {"field": path, "parts": len(unreadable)},
                                               param=path))
        estimated = [(p, w) for p, w, tokens in references if tokens] + unreadable[len(references):]
        if estimated:
            context.warnings.append(f"{len(estimated)} part(s) counted at a conservative estimate: "
                                    f"{estimated[0][0]}: {estimated[0][1]}")
        referenced = sum(tokens for _, _, tokens in references)
        if referenced:  # content pulled in outside what the view counts: untrimmable, like the request's overhead
            counter = with_overhead(counter, referenced)
    sent = request  # the request as the client sent it (what shadow mode forwards)
    try:
        try:
            reserve, source = output_asked(request, shape, context.limits)
            if source == "request" and reserve is not None:
                request, reserve = _clamp_output(request, reserve, window, context, shape, counter)
            budget = compute_budget(window, requested_output_tokens=reserve, policy=policy.budget,
                                    reserve_source=source)
        except OutputReserveTooLargeError as exc:
            # Count anyway so the client learns both numbers it needs to choose a smaller max_tokens.
            tokens = shape.count(request, counter)
            raise OutputReserveTooLargeError(f"{exc}; the request has {tokens} input tokens",
                                             {**exc.facts, "tokens_before": tokens}) from None
        result = shape.trim(request, counter=counter, budget=budget, policy=policy.trim)
    except ContextBudgetError as exc:
        kind: BlockKind = "cannot_fit" if isinstance(exc, CannotFitError) else "output_reserve"
        detail = str(exc).removeprefix(f"{counter.model}: ")
        message = f"model group {model_group!r} (counted as {counter.model}, {counter.method}): {detail}"
        wants = kind == "cannot_fit" and _wants_provider_count(policy.provider_count, calibration, counter,
                                                               exc.facts.get("tokens_before"), exc.facts.get("budget"))
        return context.blocked(BlockReason(kind, message, {"model_group": model_group, **exc.facts}),
                               wants_provider_count=wants)
    except MalformedRequestError as exc:
        return context.blocked(_malformed(exc))

    changed = result.report.changed or request is not sent
    if result.report.changed:
        # Checked on the request as sent, and said in the record: a provider 400 for these is not the
        # trimmer's doing. (Untouched requests need no such check: nothing of ours reached the provider.)
        try:
            problems = shape.problems(request)
        except Exception:  # a structure too odd to check: the counter accepted it, the provider will judge
            problems = []
        if problems:
            context.warnings.append(f"request invalid before trimming ({len(problems)} problem(s)), not caused "
                                    f"by budget_hook: " + "; ".join(shown_problem(p) for p in problems[:3]))
    action: Action = shadowed("trimmed", policy.mode) if changed else "pass"
    forwarded = result.request if policy.mode == "enforce" else sent
    wants = _wants_provider_count(policy.provider_count, calibration, counter, result.report.tokens_before,
                                  result.report.budget.budget)
    return context.decision(action, request=forwarded, report=result.report, wants_provider_count=wants)


def output_asked(request: Mapping[str, Any], shape: ConversationShape, limits: ModelLimits
                 ) -> tuple[int | None, str]:
    """The output allowance that will reach the provider for ``request`` on a deployment with ``limits``, and where
    it comes from: the request's own (``shape.output_token_fields``), else what LiteLLM fills in (Anthropic requires
    one: the deployment's, or with a thinking budget that budget and 4,096, ``thinking_output_tokens``; the larger),
    else None. Raises ``MalformedRequestError`` for an odd value, naming its field."""
    reserve = requested_output_tokens(request, shape.output_token_fields)
    adapted = shape.adapted_output_fields
    if reserve is not None and limits.filled_output_tokens is not None and adapted is not None \
            and requested_output_tokens(request, adapted(request)) is None:
        reserve = None  # set where LiteLLM's adapter does not read it: Claude gets its own filled in
    thinking = thinking_output_tokens(request) or 0
    fill = max(limits.filled_output_tokens, thinking) if limits.filled_output_tokens is not None else \
        thinking if limits.fills_thinking_output else 0  # a model LiteLLM fills only for thinking (a Bedrock ARN)
    if reserve is None:
        return (fill, "litellm_default") if fill else (None, "request")
    if fill > reserve and isinstance(request.get("extra_body"), Mapping) and requested_output_tokens(
            {k: v for k, v in request.items() if k != "extra_body"}, shape.output_token_fields) is None:
        return fill, "litellm_default"  # set in extra_body alone, which LiteLLM's filling does not see (a review)
    return reserve, "request"


def count_facts(counter: TokenCounter, calibration: Calibration | None = None) -> dict[str, Any]:
    """How a decision counts (the record's ``count``): ``how`` is ``exact`` (the model's own tokenizer and
    chat format), ``offline tokenizer`` (the family's own vocabulary, framing estimated), ``estimate`` (an
    OpenAI encoding times the family's factor) or ``provider`` (the provider's own counter answered)."""
    profile = counter.profile
    if calibration is not None and calibration.provider_tokens is not None:
        how = "provider"
    elif profile.exact:
        how = "exact"
    elif profile.encoding_name in FAMILY_ENCODINGS:
        how = "offline tokenizer"
    else:
        how = "estimate"
    facts: dict[str, Any] = {"how": how, "method": profile.method, "family": profile.family}
    if not profile.exact:
        facts["factor"] = profile.safety_factor
    if calibration is not None and (calibration.correction is not None or calibration.provider_note is not None):
        facts.update(calibration.as_dict())
    return facts


def _wants_provider_count(mode: str, calibration: Calibration, counter: TokenCounter, tokens: Any,
                          budget: Any) -> bool:
    """Asking the provider could flip this decision: the policy wants it, nobody asked yet, and (for
    ``near_budget``) the estimate lies within its measured error of the budget; ``always`` asks every time."""
    if mode == "off" or calibration.provider_note is not None:
        return False
    if not isinstance(tokens, int) or not isinstance(budget, int):
        return False
    return mode == "always" or needs_provider_count(tokens, budget, count_band(counter.profile.family))


def _clamp_output(request: Mapping[str, Any], reserve: int, window: int, context: _Context, shape: ConversationShape,
                  counter: TokenCounter) -> tuple[Mapping[str, Any], int]:
    """``clamp_max_tokens``: the first rung, before any input is cut. When the input does not fit beside the
    output allowance the request asks for, lower that allowance (never below ``max_tokens_floor``) to what
    leaves the input room; the forwarded request carries the lowered value, and the record says so."""
    policy = context.resolved.policy.budget
    if not policy.clamp_max_tokens or reserve <= policy.max_tokens_floor:
        return request, reserve
    margin = safety_margin(window, policy)
    tokens = shape.count(request, counter)
    lowered = max(policy.max_tokens_floor, min(reserve, window - margin - tokens))
    if lowered >= reserve:
        return request, reserve
    context.warnings.append(f"max_tokens lowered from {reserve} to {lowered} (clamp_max_tokens): the input has "
                            f"{tokens} tokens, the window {window}")
    return with_output_tokens(request, shape.output_token_fields, lowered), lowered


def decide_inputs(
    request: Mapping[str, Any],
    *,
    model_group: str,
    limits: ModelLimits,
    resolved: ResolvedPolicy,
    counter: TokenCounter,
    shape: InputsShape,
) -> Decision:
    """Decide on a per-input shape: ``/embeddings`` or ``/completions``.

    Embeddings: each input must fit the model's input limit (no output). Completions: each prompt must
    fit window - output reserve - margin, like a chat request. Over: blocked, naming which input and by
    how much, unless the policy's ``truncate_embedding_inputs`` asks to cut embedding inputs.
    """
    policy = resolved.policy
    context = _Context(request, model_group, limits, resolved, count=count_facts(counter))
    window, early = context.start()
    if early is not None:
        return early
    name = shape.field
    embedding = not shape.reserves_output
    terms: dict[str, Any]
    references = shape.references(request)  # content the inputs are sent with that is not text (``prompt_embeds``)
    if references:
        context.unseen = True
        path, why, _ = references[0]
        if policy.unreadable_content == "block":
            message = (f"{path}: {why}, so the gateway cannot check it against the context budget, and its policy "
                       f"blocks such requests; send the content as text")
            return context.blocked(BlockReason("unreadable", message, {"field": path, "parts": len(references)},
                                               param=path))
        context.warnings.append(f"{len(references)} part(s) counted at a conservative estimate: {path}: {why}")
    referenced = sum(tokens for _, _, tokens in references)
    try:
        if embedding:
            cap = policy.budget.max_input_tokens
            limit = window if cap is None else min(window, cap)
            terms = {"window": window, "output_reserve": 0, "safety_margin": 0, "cap": cap, "budget": limit}
        else:
            reserve = requested_output_tokens(request, shape.output_token_fields)
            budget = compute_budget(window, requested_output_tokens=reserve, policy=policy.budget)
            limit, terms = budget.budget, budget.as_dict()
        result = check_inputs(request.get(name), field=name, counter=counter, limit=limit,
                              truncate=embedding and policy.truncate_embedding_inputs,
                              joined=not embedding and limits.joins_prompts,
                              shared=shared_tokens(request, shape.shared_fields, counter) + referenced)
    except ContextBudgetError as exc:
        message = f"model group {model_group!r}: {exc}"
        return context.blocked(BlockReason("output_reserve", message, {"model_group": model_group, **exc.facts}))
    except MalformedRequestError as exc:
        return context.blocked(_malformed(exc))

    if result.over and not result.truncated:
        what = "input" if embedding else "prompt"
        reserve_terms = "" if embedding else (f" (window {terms['window']} - output reserve {terms['output_reserve']}"
                                              f" - safety margin {terms['safety_margin']})")
        message = (
            f"model group {model_group!r} (counted as {counter.model}, {counter.method}): "
            f"{result.describe_over()}{reserve_terms}. This model's maximum context length is {window} tokens. "
            + (f"Send the {what}s in separate requests, or fewer at a time" if result.over_together
               else f"Split each {what} into smaller pieces")
            + ("" if embedding else " or lower max_tokens") + "; nothing was truncated."
        )
        facts = {"model_group": model_group, **terms, "field": name,
                 "over": [{"index": o.index, "tokens": o.tokens, "over_by": o.over_by} for o in result.over[:100]]}
        return context.blocked(BlockReason("cannot_fit", message, facts, param=name), inputs=result,
                               input_budget=terms)
    forwarded = request
    action: Action = "pass"
    if result.truncated:
        action = shadowed("trimmed", policy.mode)
        if policy.mode == "enforce":
            forwarded = {**request, name: result.value}
    return context.decision(action, request=forwarded, inputs=result, input_budget=terms)
