"""What a request shape declares, and the one way every conversation shape is counted and trimmed.

A shape is one request format the gateway budgets (chat, Anthropic messages, Responses, Gemini
``generateContent``, completions, embeddings). Its module declares, in one ``ConversationShape`` or
``InputsShape`` value, everything about it: the LiteLLM call types and routes it serves, the metadata key
LiteLLM reads hook metadata from, its output-token fields, where its content lives, how to recognise a
body of it, its native error wording and, when its clients read another error object than OpenAI's, that
object (``error_body``). A conversation shape also declares how to see its body as a chat-shaped ``View``
(one view message per unit that can be trimmed) and how to write each trimming action back into its own
format. It is counted from the same view it is trimmed on, so the two can never disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..budget import Budget
from ..counting import TokenCounter
from ..errors import CannotFitError
from ..trimming import (
    EDITING_ACTIONS,
    MessageAction,
    TrimPolicy,
    TrimResult,
    check_native_fit,
    content_hash,
    trim_request,
)

#: trims of a view per request at most: the first, then aims lower until the written-back body fits (or no aim can)
RETRIES = 8


#: the report's note when a prompt-cache prefix (``View.protected``) had to be rewritten to fit
CACHE_PREFIX_NOTE = "cache_prefix_rewritten"


@dataclass(frozen=True)
class View:
    """A request seen as a chat request: what is counted and trimmed."""

    #: chat-shaped request (``messages``, ``tools``...); for the chat shape, the body itself
    request: Mapping[str, Any]
    #: per view message, where it came from in the native body (the shape's own reference type)
    refs: tuple[Any, ...] = ()
    #: view messages that may leave with their turn but are never rewritten (signed thinking...)
    no_edit: frozenset[int] = frozenset()
    #: view messages protected in a first pass (a prompt-cache prefix), given up only if nothing else fits
    protected: frozenset[int] = frozenset()
    #: view messages never dropped, though they may be compacted (a tool result whose call the server holds)
    keep: frozenset[int] = frozenset()


#: what a block looks like to the client, in the shape's own words: (facts, tokens_before) -> sentence
Wording = Callable[[Mapping[str, Any], "int | None"], str]


def unreadable_parts(items: Any, key: str, content_key: str, why: Callable[[Any], str | None]
                     ) -> list[tuple[str, str]]:
    """``(path, why)`` for every part of ``items[i][content_key]`` that ``why`` says cannot be sized."""
    found: list[tuple[str, str]] = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        content = item.get(content_key) if isinstance(item, Mapping) else None
        for part_index, part in enumerate(content if isinstance(content, list) else []):
            reason = why(part)
            if reason:
                found.append((f"{key}[{index}].{content_key}[{part_index}]", reason))
    return found


def touched_item(body: Mapping[str, Any], key: str, action: MessageAction) -> Mapping[str, Any] | None:
    """The native message or item an action refers to (``body[key][action.index]``), if it is one."""
    items = body.get(key)
    if not isinstance(items, list) or action.index >= len(items) or not isinstance(items[action.index], Mapping):
        return None
    item: Mapping[str, Any] = items[action.index]
    return item


def touched_parts(body: Mapping[str, Any], key: str, field: str, action: MessageAction) -> Any:
    """What an action on ``body[key][action.index]`` touched: the item's ``field`` (a string, or its list of
    blocks or parts, narrowed to the one block the action names); None when there is no such item."""
    item = touched_item(body, key, action)
    if item is None:
        return None
    value = item.get(field)
    if isinstance(value, list) and action.block is not None and action.block < len(value):
        return [value[action.block]]
    return value


def view_decisions(view: View, result: TrimResult) -> tuple[dict[int, MessageAction], dict[int, Mapping[str, Any]]]:
    """What the trimmer decided on a view: the action per view index, and each surviving view message in
    its final (possibly edited) form, by view index: what a shape's ``apply`` writes back."""
    actions = {action.index: action for action in result.report.actions}
    kept = [i for i in range(len(view.refs)) if i not in actions or actions[i].action != "dropped"]
    messages = list(result.request["messages"])
    notice = result.report.notice
    if notice is not None:
        del messages[notice.position]  # the notice is no view message: each shape writes it its own way
    return actions, dict(zip(kept, messages, strict=True))


#: a native message or item with the index it had in the body (None: one the trimmer added)
Placed = tuple[int | None, Any]


def place_notice(items: list[Placed], after: int | None, notice: Any) -> list[Placed]:
    """Insert ``notice`` right after the native item ``after`` (the last kept one before the first cut), or
    first when the cut follows the system prompt."""
    position = 0
    if after is not None:
        position = max((i + 1 for i, (index, _) in enumerate(items) if index is not None and index <= after),
                       default=0)
    return [*items[:position], (None, notice), *items[position:]]


def merge_new_neighbours(items: list[Placed], role: Callable[[Any], Any], merge: Callable[[Any, Any], Any]
                         ) -> list[Any]:
    """For a format whose roles must alternate (Anthropic, Gemini): two items of the same role that the
    trim made neighbours (one was added, or what stood between them was dropped) become one item, the
    first one's content followed by the second's. Neighbours the client sent stay as they were."""
    out: list[Placed] = []
    for index, item in items:
        if out:
            last_index, last = out[-1]
            made_by_us = index is None or last_index is None or index != last_index + 1
            if made_by_us and role(last) == role(item):
                out[-1] = (index if index is not None else last_index, merge(last, item))
                continue
        out.append((index, item))
    return [item for _, item in out]


@dataclass(frozen=True)
class Shape:
    """Everything common to every request shape."""

    name: str
    #: LiteLLM call types (``async_pre_call_hook``'s ``call_type``) this shape serves
    call_types: frozenset[str]
    #: the proxy routes that carry it (documentation, the CLI's help and the tests)
    routes: tuple[str, ...]
    #: where LiteLLM reads hook metadata from for these call types
    metadata_key: Literal["metadata", "litellm_metadata"]
    #: request fields that carry an output allowance (reserved inside the window)
    output_token_fields: tuple[str, ...]
    #: request fields that carry what the model reads (sizes the request for the thread pool)
    content_fields: tuple[str, ...]
    #: the field a "cannot fit" block names, and the one an output-reserve block names
    param: str
    output_param: str | None
    #: does a body look like this shape (the CLI's auto-detection; checked in registry order)
    detect: Callable[[Mapping[str, Any]], bool]
    #: top-level fields LiteLLM fills prompt text in for after the check on this shape's calls alone (the proxy
    #: fills a chat or Responses call's stored prompt in before the hook, a text completion's inside the call), or
    #: forwards beside the content uncounted (an embedding request's ``messages``): a client's is a 400 naming it
    prompt_fields: tuple[str, ...] = ()
    #: the provider's own overflow sentence, put first in a block's message; None: OpenAI's wording only
    overflow_wording: Wording | None = None
    #: the same when the output allowance leaves no room (Anthropic words it apart)
    reserve_wording: Wording | None = None
    #: the output-token fields LiteLLM's chat adapter reads of a body when it sends it to another provider's model (a
    #: Claude deployment, which then gets an allowance filled in when none of them is set); None: all of
    #: ``output_token_fields``
    adapted_output_fields: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    #: the shape's own error object for a refusal, from (status, message, code); None: OpenAI's
    #: ``{"message", "type", "param", "code"}``
    error_body: Callable[[int, str, str], dict[str, Any]] | None = None
    #: for an API that reports a streamed call's failure as events (the Responses API's ``response.failed``):
    #: the SSE text from (call id, code, message, model group); None: a streamed refusal is a plain HTTP error
    streamed_error: Callable[[Any, str, str, str], str] | None = None

    @property
    def kind(self) -> Literal["conversation", "inputs"]:
        raise NotImplementedError


@dataclass(frozen=True)
class ConversationShape(Shape):
    """A shape with a conversation: counted and trimmed on its chat-shaped view."""

    view: Callable[[Mapping[str, Any]], View] = field(default=lambda body: View(body))
    #: writes the trimmer's decisions back into the native body; None when the view is the body (chat)
    apply: Callable[[Mapping[str, Any], View, TrimResult], dict[str, Any]] | None = None
    #: per editing action kind, how the shape writes an edited view message back (checked complete)
    writers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    #: an action on the view, re-expressed on the native body (its index, block, role and hash)
    native_action: Callable[[MessageAction, View, Mapping[str, Any]], MessageAction] | None = None
    #: structure problems the provider would reject, found in a body as sent
    problems: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda body: [])
    #: the original text of a touched message or block (records, with ``log_dropped_content`` only)
    touched_content: Callable[[Mapping[str, Any], MessageAction], str] = field(default=lambda body, action: "")
    #: parts whose size cannot be known from the request (content referenced by id or URL...): (path, why)
    unreadable: Callable[[Mapping[str, Any]], list[tuple[str, str]]] = field(default=lambda body: [])
    #: content pulled in by reference outside the view (a cached context, a stored prompt, an MCP server's
    #: tools, server-held history): (path, why, tokens estimated for it); see ``shapes.references``
    references: Callable[[Mapping[str, Any]], list[tuple[str, str, int]]] = field(default=lambda body: [])
    #: facts about the body the report must carry (history the gateway cannot see...)
    notes: Callable[[Mapping[str, Any]], tuple[str, ...]] = field(default=lambda body: ())
    #: the report's note when ``View.protected`` had to be given up to fit
    protected_note: str = ""
    #: what the client can do when even the trimmed request does not fit
    remedy: str = "Shorten the latest message, lower max_tokens, or use a model with a larger context window."

    @property
    def kind(self) -> Literal["conversation", "inputs"]:
        return "conversation"

    def missing_writers(self) -> list[str]:
        """Editing actions this shape cannot write back (must be empty; the registry checks it)."""
        if self.apply is None:
            return []
        return [action for action in EDITING_ACTIONS if action not in self.writers]

    def count(self, body: Mapping[str, Any], counter: TokenCounter) -> int:
        return counter.count_request(self.view(body).request).total

    def trim(self, body: Mapping[str, Any], *, counter: TokenCounter, budget: Budget,
             policy: TrimPolicy = TrimPolicy()) -> TrimResult:
        """Trim on the view and write the decisions back. Returns the body itself when it fits; the
        reported ``tokens_after`` is a fresh count of the result, which must fit the budget."""
        view = self.view(body)
        notes = self.notes(body)
        view_budget = budget
        over = cannot = 0  # the lowest aim whose body was over the budget; the highest the view could not reach
        for attempt in range(RETRIES):
            try:
                result, protected_given_up = self._trim_view(view, counter, view_budget, policy,
                                                             hash_actions=self.native_action is None)
            except CannotFitError:
                if not attempt:
                    raise
                cannot = view_budget.budget
                if over - cannot <= 1:
                    break  # no aim between the two: the last body's own count is over (raised below)
                # an aim between one the view cannot reach and one whose body is over may fit: a refusal must not
                # depend on where the first aims fell (Gemini: budgets 2,118-2,125 trimmed, 2,126-2,131 refused)
                view_budget = replace(view_budget, budget=(cannot + over) // 2)
                continue
            report = result.report
            rewrote = protected_given_up or (report.notice is not None and report.notice.rewrites_cache_prefix)
            extra = notes + ((self.protected_note,) if rewrote else ())
            if extra:
                report = replace(report, notes=report.notes + extra)
            if not report.changed:
                return TrimResult(body, report)
            if self.apply is None:
                return TrimResult(result.request, report)
            new_body = self.apply(body, view, result)
            tokens_after = self.count(new_body, counter)
            if tokens_after <= budget.budget or view_budget.budget <= 1:
                break
            # Written back, the body counts a little more than its view did (merged messages, the notice):
            # aim the view that much lower (above an aim it could not reach).
            over = view_budget.budget
            aim = max(1, over - (tokens_after - budget.budget) - 16)
            view_budget = replace(view_budget, budget=aim if aim > cannot else (cannot + over) // 2)
            if view_budget.budget <= cannot:
                break
        check_native_fit(counter, budget, report.tokens_before, tokens_after, remedy=self.remedy)
        native_action = self.native_action
        actions = tuple(native_action(a, view, body) for a in report.actions) if native_action else report.actions
        # an action no native message stands for keeps its view message's hash (computed only then)
        messages = view.request["messages"]
        actions = tuple(a if a.content_hash else replace(a, content_hash=content_hash(messages[v.index]))
                        for a, v in zip(actions, report.actions, strict=True))
        anchor = report.anchor  # a view index, named as the native message (item) it stands for
        if anchor is not None and native_action is not None and report.actions:
            anchor = native_action(replace(report.actions[0], index=anchor, block=None), view, body).index
        return TrimResult(new_body, replace(report, budget=budget, tokens_after=tokens_after, actions=actions,
                                            anchor=anchor))

    @staticmethod
    def _trim_view(view: View, counter: TokenCounter, budget: Budget, policy: TrimPolicy, *,
                   hash_actions: bool = True) -> tuple[TrimResult, bool]:
        """Trim the view, its protected prefix kept if anything fits so (then ``False``), else given up.
        ``hash_actions``: False for a shape whose native actions name their own messages' hashes."""
        try:
            return trim_request(view.request, counter=counter, budget=budget, policy=policy, protected=view.protected,
                                no_edit=view.no_edit, keep=view.keep, hash_actions=hash_actions), False
        except CannotFitError:
            if not view.protected:
                raise
        return trim_request(view.request, counter=counter, budget=budget, policy=policy, no_edit=view.no_edit,
                            keep=view.keep, hash_actions=hash_actions), True


@dataclass(frozen=True)
class InputsShape(Shape):
    """A shape of independent inputs (a prompt or a batch of them; embedding inputs), each budgeted alone."""

    #: the field holding the inputs
    field: str = "input"
    #: does the model produce output inside the same window (completions) or not (embeddings)
    reserves_output: bool = True
    #: text fields every input is sent with, counted in each one (completions' ``suffix``: ``inputs.shared_tokens``)
    shared_fields: tuple[str, ...] = ()
    #: content every input is sent with that is not text (completions' ``prompt_embeds``): (path, why, tokens
    #: estimated for it), flagged as unreadable content and counted in each input at its estimate
    references: Callable[[Mapping[str, Any]], list[tuple[str, str, int]]] = dataclasses.field(
        default=lambda body: [])

    @property
    def kind(self) -> Literal["conversation", "inputs"]:
        return "inputs"

    def count(self, body: Mapping[str, Any], counter: TokenCounter) -> int:
        from .inputs import count_inputs, shared_tokens

        shared = shared_tokens(body, self.shared_fields, counter)
        return sum(count_inputs(body.get(self.field), field=self.field, counter=counter, shared=shared))
