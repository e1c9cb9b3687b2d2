"""One request's budget decision: count, budget, trim or block, as facts (pure; no I/O, no LiteLLM).

Contract: ``decide_chat(request, model_group=..., limits=..., resolved=..., counter=...)`` returns a frozen
``Decision`` and never raises for a client's input: a request that cannot fit, whose own ``max_tokens``
leaves no room, or that is malformed comes back as ``action="blocked"`` with the error message and its
facts, so the adapter alone turns it into an HTTP error (and shadow mode can log what *would* have
happened). ``Decision.request`` is what to forward: the caller's object itself unless the decision
enforced a trim. Only the plugin's own failures (a bug, a tokenizer that cannot load) raise.

Actions: ``pass`` (fits), ``trimmed``, ``blocked``; in shadow mode ``would_trim`` / ``would_block`` with
the original request forwarded; ``skipped`` when the mode is off.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Callable, Mapping
from typing import Any

from .budget import compute_budget, requested_output_tokens
from .counting import TokenCounter
from .errors import CannotFitError, ContextBudgetError, MalformedRequestError, OutputReserveTooLargeError
from .policy import ResolvedPolicy
from .anthropic_trim import anthropic_pairing_problems, count_anthropic, trim_anthropic
from .inputs import InputsResult, check_inputs
from .responses_format import count_responses, responses_pairing_problems, trim_responses
from .structure import pairing_problems
from .trimming import TrimReport, TrimResult, trim_request


@dataclass(frozen=True)
class ModelLimits:
    """The routed group's input window and where it came from."""

    #: None when no source knows it (the policy then decides)
    window: int | None
    #: e.g. "router: min over 2 deployments", "model map: gpt-4o", "policy default"
    source: str
    #: the backend model whose tokenizer counts the request (``anthropic/claude-...``)
    counting_model: str
    base_model: str | None = None
    deployments: int = 0
    #: the group names the request routes to (differs from the requested name for a router alias)
    routed_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockReason:
    kind: str  # "cannot_fit" | "output_reserve" | "malformed" | "unknown_window"
    message: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: the request field at fault (``messages[3].content``) for malformed input
    param: str | None = None

    @property
    def code(self) -> str:
        # Only a real overflow says context_length_exceeded: agent frameworks react to it by compacting
        # and retrying, which cannot help a malformed request or a model whose window nobody knows.
        return {"malformed": "invalid_request", "unknown_window": "model_window_unknown"}.get(
            self.kind, "context_length_exceeded")


@dataclass(frozen=True)
class Decision:
    action: str
    mode: str
    model_group: str
    limits: ModelLimits
    resolved: ResolvedPolicy
    request: Mapping[str, Any]
    report: TrimReport | None = None
    block: BlockReason | None = None
    warnings: tuple[str, ...] = ()
    #: /embeddings and /completions: per-input counts, and the per-input budget terms
    inputs: InputsResult | None = None
    input_budget: Mapping[str, Any] | None = None

    @property
    def enforced_block(self) -> bool:
        return self.action == "blocked"

    @property
    def tokens_before(self) -> int | None:
        if self.report:
            return self.report.tokens_before
        if self.inputs:
            if not self.inputs.truncated:
                return self.inputs.total
            original = {o.index or 0: o.tokens for o in self.inputs.over}
            return sum(original.get(i, t) for i, t in enumerate(self.inputs.tokens))
        return self.block.facts.get("tokens_before") if self.block else None

    @property
    def tokens_after(self) -> int | None:
        if self.report:
            return self.report.tokens_after
        if self.inputs:
            return self.inputs.total
        return self.block.facts.get("tokens_after_trimming") if self.block else None

    def counts(self) -> dict[str, int]:
        """How many messages each action touched (dropped / compacted / shortened)."""
        totals = {"dropped": 0, "compacted": 0, "shortened": 0, "images_removed": 0}
        for action in self.report.actions if self.report else ():
            totals[action.action] += 1
        return totals

    def as_dict(self) -> dict[str, Any]:
        """The decision record: numbers, sources, and every touched message by index, role, size and hash."""
        record: dict[str, Any] = {
            "action": self.action,
            "mode": self.mode,
            "model_group": self.model_group,
            "window": self.limits.window,
            "window_source": self.limits.source,
            "counting_model": self.limits.counting_model,
            "policy_sources": list(self.resolved.sources),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }
        if self.resolved.client_max_input_tokens is not None:
            record["client_max_input_tokens"] = self.resolved.client_max_input_tokens
            record["client_cap_applied"] = self.resolved.client_cap_applied
        if self.resolved.ignored_client_settings:
            record["ignored_client_settings"] = list(self.resolved.ignored_client_settings)
        if self.resolved.ignored_metadata_settings:
            record["ignored_metadata_settings"] = list(self.resolved.ignored_metadata_settings)
        if self.report:
            report = self.report.as_dict()
            record.update(
                method=report["method"],
                budget=report["budget"],
                target=report["target"],
                messages=self.counts(),
                dropped_turns=report["dropped_turns"],
                actions=report["actions"],
            )
            if report["changed"]:
                record["protected_tokens"] = report["protected_tokens"]
            if report.get("notes"):
                record["notes"] = report["notes"]
        if self.inputs:
            inputs = self.inputs
            record.update(
                budget=dict(self.input_budget or {}),
                inputs={"field": inputs.field, "count": len(inputs.tokens), "limit": inputs.limit,
                        "largest": max(inputs.tokens, default=0),
                        "over": [{"index": o.index, "tokens": o.tokens, "over_by": o.over_by} for o in inputs.over[:100]],
                        "truncated": list(inputs.truncated)},
            )
        if self.block:
            record["block"] = {"kind": self.block.kind, "message": self.block.message, "param": self.block.param,
                               "facts": dict(self.block.facts)}
            if "budget" not in record and "budget" in self.block.facts:
                record["budget"] = {k: self.block.facts[k] for k in
                                    ("window", "output_reserve", "output_reserve_source", "safety_margin", "cap", "budget")
                                    if k in self.block.facts}
        warnings = list(self.resolved.warnings) + list(self.warnings)
        if warnings:
            record["warnings"] = warnings
        return record


def _shadowed(action: str, mode: str) -> str:
    if mode != "shadow":
        return action
    return {"trimmed": "would_trim", "blocked": "would_block"}.get(action, action)


@dataclass(frozen=True)
class Shape:
    """How one request format is counted and trimmed (its body stays in its own format)."""

    name: str
    count: Callable[[Mapping[str, Any], TokenCounter], int]
    trim: Callable[..., TrimResult]
    #: structure problems the provider would reject, found in the request *as sent*
    problems: Callable[[Mapping[str, Any]], list[str]]


def _count_chat(body: Mapping[str, Any], counter: TokenCounter) -> int:
    return counter.count_request(body).total


def _list_problems(check: Callable[[Any], list[str]], key: str) -> Callable[[Mapping[str, Any]], list[str]]:
    def problems(body: Mapping[str, Any]) -> list[str]:
        value = body.get(key)
        return check(value) if isinstance(value, list) else []
    return problems


CHAT = Shape("chat", _count_chat, trim_request, _list_problems(pairing_problems, "messages"))
ANTHROPIC_MESSAGES = Shape("anthropic_messages", count_anthropic, trim_anthropic,
                           _list_problems(anthropic_pairing_problems, "messages"))
RESPONSES = Shape("responses", count_responses, trim_responses, _list_problems(responses_pairing_problems, "input"))


def _blocked(common: dict, limits: ModelLimits, block: BlockReason, warnings: list[str], **extra: Any) -> Decision:
    return Decision(action=_shadowed("blocked", common["mode"]), limits=limits, block=block,
                    warnings=tuple(warnings), **common, **extra)


def _resolve_window(model_group: str, limits: ModelLimits, policy: Any, warnings: list[str]
                    ) -> tuple[ModelLimits, BlockReason | None]:
    if limits.window is not None:
        return limits, None
    if policy.unknown_window == "block":
        message = (
            f"model group {model_group!r}: its context window is unknown (not in the router's model_info, "
            f"not in litellm's model map), and the gateway's policy blocks such requests. Ask the gateway "
            f"operator to set model_info.max_input_tokens for this model group."
        )
        return limits, BlockReason("unknown_window", message, {"model_group": model_group})
    warnings.append(f"context window of {model_group!r} unknown; assumed default_max_input_tokens="
                    f"{policy.default_max_input_tokens}")
    return replace(limits, window=policy.default_max_input_tokens, source="policy default (window unknown)"), None


def _begin(request: Mapping[str, Any], model_group: str, limits: ModelLimits, resolved: ResolvedPolicy
           ) -> tuple[dict[str, Any], ModelLimits, list[str], Decision | None]:
    """What every decision starts with: the common fields, the window, and an early answer when the
    mode is off or the window is unknown and the policy blocks."""
    policy = resolved.policy
    common = dict(mode=policy.mode, model_group=model_group, resolved=resolved, request=request)
    warnings: list[str] = []
    if policy.mode == "off":
        return common, limits, warnings, Decision(action="skipped", limits=limits, **common)
    limits, unknown = _resolve_window(model_group, limits, policy, warnings)
    early = _blocked(common, limits, unknown, warnings) if unknown else None
    return common, limits, warnings, early


def _malformed(exc: MalformedRequestError) -> BlockReason:
    return BlockReason("malformed", f"invalid request: {exc}", {"field": exc.field}, param=exc.field)


def decide_chat(
    request: Mapping[str, Any],
    *,
    model_group: str,
    limits: ModelLimits,
    resolved: ResolvedPolicy,
    counter: TokenCounter,
    shape: Shape = CHAT,
) -> Decision:
    """Decide on a conversation request: chat (default), ``ANTHROPIC_MESSAGES`` or ``RESPONSES``."""
    policy = resolved.policy
    common, limits, warnings, early = _begin(request, model_group, limits, resolved)
    if early is not None:
        return early

    try:
        try:
            budget = compute_budget(limits.window, requested_output_tokens=requested_output_tokens(request),
                                    policy=policy.budget)
        except OutputReserveTooLargeError as exc:
            # Count anyway so the client learns both numbers it needs to choose a smaller max_tokens.
            tokens = shape.count(request, counter)
            raise OutputReserveTooLargeError(f"{exc}; the request has {tokens} input tokens",
                                             {**exc.facts, "tokens_before": tokens}) from None
        result = shape.trim(request, counter=counter, budget=budget, policy=policy.trim)
    except ContextBudgetError as exc:
        kind = "cannot_fit" if isinstance(exc, CannotFitError) else "output_reserve"
        detail = str(exc).removeprefix(f"{counter.model}: ")
        message = f"model group {model_group!r} (counted as {counter.model}, {counter.profile.method}): {detail}"
        return _blocked(common, limits, BlockReason(kind, message, {"model_group": model_group, **exc.facts}), warnings)
    except MalformedRequestError as exc:
        return _blocked(common, limits, _malformed(exc), warnings)

    changed = result.report.changed
    if changed:
        # Checked on the request as sent, and said in the record: a provider 400 for these is not the
        # trimmer's doing. (Untouched requests need no such check: nothing of ours reached the provider.)
        try:
            problems = shape.problems(request)
        except Exception:  # a structure too odd to check: the counter accepted it, the provider will judge
            problems = []
        if problems:
            warnings.append(f"request invalid before trimming ({len(problems)} problem(s)), not caused by "
                            f"budget_hook: " + "; ".join(problems[:3]))
    action = _shadowed("trimmed", policy.mode) if changed else "pass"
    forwarded = result.request if policy.mode == "enforce" else request
    return Decision(action=action, limits=limits, report=result.report, warnings=tuple(warnings),
                    **{**common, "request": forwarded})


def decide_inputs(
    request: Mapping[str, Any],
    *,
    field: str,
    model_group: str,
    limits: ModelLimits,
    resolved: ResolvedPolicy,
    counter: TokenCounter,
) -> Decision:
    """Decide on ``/embeddings`` (``field="input"``) or ``/completions`` (``field="prompt"``).

    Embeddings: each input must fit the model's input limit (no output). Completions: each prompt must
    fit window - output reserve - margin, like a chat request. Over: blocked, naming which input and by
    how much, unless the policy's ``truncate_embedding_inputs`` asks to cut embedding inputs.
    """
    policy = resolved.policy
    common, limits, warnings, early = _begin(request, model_group, limits, resolved)
    if early is not None:
        return early
    embedding = field == "input"
    budget_facts: dict[str, Any]
    try:
        if embedding:
            limit = limits.window if policy.budget.max_input_tokens is None else min(limits.window, policy.budget.max_input_tokens)
            budget_facts = {"window": limits.window, "output_reserve": 0, "safety_margin": 0,
                            "cap": policy.budget.max_input_tokens, "budget": limit}
        else:
            budget = compute_budget(limits.window, requested_output_tokens=requested_output_tokens(request),
                                    policy=policy.budget)
            limit, budget_facts = budget.budget, budget.as_dict()
        result = check_inputs(request.get(field), field=field, counter=counter, limit=limit,
                              truncate=embedding and policy.truncate_embedding_inputs)
    except ContextBudgetError as exc:
        message = f"model group {model_group!r}: {exc}"
        return _blocked(common, limits, BlockReason("output_reserve", message, {"model_group": model_group, **exc.facts}),
                        warnings)
    except MalformedRequestError as exc:
        return _blocked(common, limits, _malformed(exc), warnings)

    if result.over and not result.truncated:
        what = "input" if embedding else "prompt"
        reserve = "" if embedding else (f" (window {budget_facts['window']} - output reserve "
                                        f"{budget_facts['output_reserve']} - safety margin {budget_facts['safety_margin']})")
        message = (
            f"model group {model_group!r} (counted as {counter.model}, {counter.profile.method}): "
            f"{result.describe_over()}{reserve}. This model's maximum context length is {limits.window} tokens. "
            f"Split each {what} into smaller pieces"
            + ("" if embedding else " or lower max_tokens") + "; nothing was truncated."
        )
        facts = {"model_group": model_group, **budget_facts, "field": field,
                 "over": [{"index": o.index, "tokens": o.tokens, "over_by": o.over_by} for o in result.over[:100]]}
        return _blocked(common, limits, BlockReason("cannot_fit", message, facts, param=field), warnings,
                        inputs=result, input_budget=budget_facts)
    forwarded = request
    action = "pass"
    if result.truncated:
        action = _shadowed("trimmed", policy.mode)
        if policy.mode == "enforce":
            forwarded = {**request, field: result.value}
    return Decision(action=action, limits=limits, warnings=tuple(warnings), inputs=result, input_budget=budget_facts,
                    **{**common, "request": forwarded})
