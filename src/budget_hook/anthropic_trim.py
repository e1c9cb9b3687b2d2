"""Count and trim an Anthropic ``/v1/messages`` request in its own format (pure; never mutates input).

Contract: ``count_anthropic(body, counter)`` estimates the request's input tokens;
``trim_anthropic(body, counter=..., budget=..., policy=...)`` returns a ``TrimResult`` whose ``request`` is
a ``/v1/messages`` body (the same object when it already fits) or raises ``CannotFitError``.

How: the body is seen through a chat-shaped *view* (``anthropic_format``), one view message per unit
that can be trimmed: each ``tool_result`` block is its own view message (images inline), the remaining
blocks of a native message another. The generic trimmer (same priorities, same invariants) decides on
the view; every decision is then applied to the native blocks it came from. So, in Anthropic terms:

* a ``tool_use`` block and its ``tool_result`` leave together (they are one turn's assistant tool call
  and its answer in the view); a turn starts at a user message that is not only tool results, so
  dropping whole turns keeps the first message ``user`` and roles alternating;
* compacting a tool result keeps the block and its ``tool_use_id`` and replaces its content with the
  head and a marker; results with ``is_error: true`` are kept;
* an assistant message carrying ``thinking`` / ``redacted_thinking`` (signed by Anthropic) or server-tool
  blocks is never edited: it stays whole or leaves with its whole turn; so is a user message that sends
  text or images along with tool results (the user's own text is never cut);
* prompt caching: everything up to the last ``cache_control`` breakpoint in ``messages`` is protected
  in a first pass; only when the request cannot fit otherwise is it trimmed again without that
  protection, and the report's ``notes`` say the cached prefix was rewritten.

The reported ``tokens_after`` is a fresh count of the native result, and it must be within the budget:
otherwise ``CannotFitError``, whatever the view said.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any

from .anthropic_format import _convert_message, _current_turn_start, anthropic_to_openai_chat
from .budget import Budget
from .counting import TokenCounter
from .errors import CannotFitError, MalformedRequestError
from .trimming import (MessageAction, TrimPolicy, TrimResult, check_native_fit, content_hash, message_text,
                       trim_request)

CACHE_PREFIX_NOTE = "cache_prefix_rewritten"


def count_anthropic(body: Mapping[str, Any], counter: TokenCounter) -> int:
    return counter.count_request(anthropic_to_openai_chat(body)).total


@dataclass(frozen=True)
class _Ref:
    message: int                   # native message index
    blocks: tuple[int, ...] | None  # native block indexes; None: the whole (string-content) message


@dataclass(frozen=True)
class _View:
    request: dict[str, Any]
    refs: tuple[_Ref | None, ...]   # per view message; None for the system message
    cache_prefix: frozenset[int]    # view indexes up to the last cache_control breakpoint
    no_edit: frozenset[int]         # view indexes never rewritten (signed thinking, mixed or server blocks)


#: blocks whose text the view can rewrite faithfully; a message with any other block (server tools,
#: search results, containers...) is never edited, because its view text includes those blocks' JSON
_EDITABLE_BLOCKS = frozenset({"text", "tool_use", "tool_result", "image", "document"})


def _has_cache_control(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    if block.get("cache_control") is not None:
        return True
    nested = block.get("content")  # a breakpoint may sit inside a tool_result's content
    return isinstance(nested, list) and any(_has_cache_control(inner) for inner in nested)


def build_view(body: Mapping[str, Any]) -> _View:
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise MalformedRequestError("messages", "missing or not a list")
    # The envelope only (system, tools, options): messages are converted one by one below, with their map.
    converted = anthropic_to_openai_chat({**body, "messages": []})
    view_messages: list[dict[str, Any]] = []
    refs: list[_Ref | None] = []
    if converted["messages"] and converted["messages"][0]["role"] == "system" and body.get("system"):
        view_messages.append(converted["messages"][0])
        refs.append(None)
    native = body["messages"]
    current_turn = _current_turn_start(native)
    last_breakpoint = -1
    no_edit: set[int] = set()
    for index, message in enumerate(native):
        keep_thinking = index >= current_turn
        where = f"messages[{index}]"
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            for part in _convert_message(message, where, keep_thinking=keep_thinking, inline_tool_images=True):
                view_messages.append(part)
                refs.append(_Ref(index, None))
            continue
        if any(_has_cache_control(block) for block in content):
            last_breakpoint = index
        results = [i for i, block in enumerate(content) if isinstance(block, Mapping) and block.get("type") == "tool_result"]
        result_set = set(results)
        rest = [i for i in range(len(content)) if i not in result_set]
        for block_index in results:
            single = {"role": message.get("role"), "content": [content[block_index]]}
            for part in _convert_message(single, f"{where}.content[{block_index}]", keep_thinking=keep_thinking,
                                         inline_tool_images=True):
                view_messages.append(part)
                refs.append(_Ref(index, (block_index,)))
        if results and rest:
            # Text or images sent along with tool results (e.g. a file the tool attached) belong to the
            # same exchange, not to a new turn: they join the last result's view message, so they stay
            # or leave with it and the turn boundary stays where Anthropic's is.
            # Never edited: compacting would cut the user's own text, which must stay as sent.
            extra = _convert_message({"role": "user", "content": [content[i] for i in rest]}, where,
                                     inline_tool_images=True)
            last = view_messages[-1]
            parts = [{"type": "text", "text": last["content"]}] if isinstance(last["content"], str) else list(last["content"])
            for extra_message in extra:
                extra_parts = extra_message.get("content")
                parts.extend([{"type": "text", "text": extra_parts}] if isinstance(extra_parts, str) else extra_parts or [])
            view_messages[-1] = {**last, "content": parts}
            refs[-1] = _Ref(index, (results[-1], *rest))
            no_edit.add(len(view_messages) - 1)
        elif rest or not results:
            remaining = {"role": message.get("role"), "content": [content[i] for i in rest]}
            frozen = any(isinstance(content[i], Mapping) and content[i].get("type") not in _EDITABLE_BLOCKS for i in rest)
            for part in _convert_message(remaining, where, keep_thinking=keep_thinking, inline_tool_images=True):
                if frozen:  # signed thinking, server-tool blocks...: stays whole or leaves with its turn
                    no_edit.add(len(view_messages))
                view_messages.append(part)
                refs.append(_Ref(index, tuple(rest)))
    cache_prefix = frozenset(i for i, ref in enumerate(refs) if ref is not None and ref.message <= last_breakpoint)
    request = {**converted, "messages": view_messages}
    return _View(request, tuple(refs), cache_prefix, frozenset(no_edit))


def trim_anthropic(
    body: Mapping[str, Any],
    *,
    counter: TokenCounter,
    budget: Budget,
    policy: TrimPolicy = TrimPolicy(),
) -> TrimResult:
    view = build_view(body)
    notes: tuple[str, ...] = ()
    try:
        result = trim_request(view.request, counter=counter, budget=budget, policy=policy,
                              protected=view.cache_prefix, no_edit=view.no_edit)
    except CannotFitError:
        if not view.cache_prefix:
            raise
        result = trim_request(view.request, counter=counter, budget=budget, policy=policy, no_edit=view.no_edit)
        notes = (CACHE_PREFIX_NOTE,)
    report = result.report
    if not report.changed:
        return TrimResult(body, report)

    new_body = _apply(body, view, result)
    tokens_after = count_anthropic(new_body, counter)
    check_native_fit(counter, budget, report.tokens_before, tokens_after,
                     remedy="Shorten the latest message, lower max_tokens, or use a model with a larger context window.")
    actions = tuple(_native_action(action, view, body) for action in report.actions)
    native_report = replace(report, tokens_after=tokens_after, actions=actions, notes=report.notes + notes)
    return TrimResult(new_body, native_report)


def _apply(body: Mapping[str, Any], view: _View, result: TrimResult) -> dict[str, Any]:
    """Carry the view's decisions over to the native messages and blocks."""
    actions = {action.index: action for action in result.report.actions}
    kept = [i for i in range(len(view.refs)) if actions.get(i) is None or actions[i].action != "dropped"]
    new_view_messages = dict(zip(kept, result.request["messages"]))
    removed_messages: set[int] = set()
    removed_blocks: dict[int, set[int]] = {}
    replaced_blocks: dict[tuple[int, int], Any] = {}
    replaced_messages: dict[int, Any] = {}
    native = body["messages"]
    for view_index, action in actions.items():
        ref = view.refs[view_index]
        if ref is None:
            continue  # system: never touched by the trimmer
        if action.action == "dropped":
            if ref.blocks is None:
                removed_messages.add(ref.message)
            else:
                removed_blocks.setdefault(ref.message, set()).update(ref.blocks)
            continue
        edited = new_view_messages[view_index]
        if ref.blocks is None:  # a string-content message: its new text is the edited view message's
            replaced_messages[ref.message] = message_text(edited)
            continue
        content = native[ref.message]["content"]
        for block_index in ref.blocks:
            block = content[block_index]
            kind = block.get("type") if isinstance(block, Mapping) else None
            if action.action == "compacted" and kind == "tool_result":
                replaced_blocks[(ref.message, block_index)] = {**block, "content": message_text(edited)}
            elif action.action == "images_removed" and kind == "image":
                replaced_blocks[(ref.message, block_index)] = {"type": "text", "text": _placeholder(edited)}
            elif action.action == "images_removed" and kind == "tool_result" and isinstance(block.get("content"), list):
                inner = [{"type": "text", "text": _placeholder(edited)} if isinstance(b, Mapping) and b.get("type") == "image"
                         else b for b in block["content"]]
                replaced_blocks[(ref.message, block_index)] = {**block, "content": inner}
            elif action.action == "shortened" and kind == "text":
                replaced_blocks[(ref.message, block_index)] = None  # all text blocks become one, below
        if action.action == "shortened":
            first_text = next((i for i in ref.blocks if isinstance(content[i], Mapping) and content[i].get("type") == "text"), None)
            if first_text is not None:
                replaced_blocks[(ref.message, first_text)] = {"type": "text", "text": message_text(edited)}

    new_messages = []
    for index, message in enumerate(native):
        if index in removed_messages:
            continue
        if index in replaced_messages:
            new_messages.append({**message, "content": replaced_messages[index]})
            continue
        content = message.get("content")
        gone = removed_blocks.get(index, set())
        touched = gone or any(key[0] == index for key in replaced_blocks)
        if not touched:
            new_messages.append(message)
            continue
        blocks = []
        for block_index, block in enumerate(content):
            if block_index in gone:
                continue
            block = replaced_blocks.get((index, block_index), block)
            if block is not None:
                blocks.append(block)
        if blocks:
            new_messages.append({**message, "content": blocks})
    return {**body, "messages": new_messages}


def _placeholder(edited: Mapping[str, Any]) -> str:
    content = edited.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and "image removed" in str(part.get("text", "")):
                return str(part["text"])
    return "[budget_hook: image removed by the gateway to fit the context budget]"


def _native_action(action: MessageAction, view: _View, body: Mapping[str, Any]) -> MessageAction:
    ref = view.refs[action.index]
    if ref is None:  # pragma: no cover - the system message is never touched
        return action
    message = body["messages"][ref.message]
    block = ref.blocks[0] if ref.blocks is not None and len(ref.blocks) == 1 else None
    hashed = message["content"][block] if block is not None else message
    return replace(action, index=ref.message, block=block, role=message.get("role", action.role),
                   content_hash=content_hash(hashed if isinstance(hashed, Mapping) else {"content": hashed}))


def anthropic_pairing_problems(messages: Any) -> list[str]:
    """Structure problems the Anthropic API rejects: a ``tool_result`` that answers no ``tool_use`` of the
    assistant message just before it, a ``tool_use`` left unanswered by the next user message, or a
    conversation that does not start with a user message."""
    problems: list[str] = []
    if not isinstance(messages, list):
        return ["messages is not a list"]
    conversation = [m for m in messages if not (isinstance(m, Mapping) and m.get("role") == "system")]
    if conversation and (not isinstance(conversation[0], Mapping) or conversation[0].get("role") != "user"):
        problems.append("the first message is not a user message")
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        if message.get("role") == "user":
            answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
            for missing in sorted(answered - pending):
                problems.append(f"messages[{index}]: tool_result for {missing} answers no tool_use just before it")
            for unanswered in sorted(pending - answered):
                problems.append(f"messages[{index}]: tool_use {unanswered} has no tool_result")
            pending = set()
        else:
            if pending:
                problems.append(f"messages[{index}]: tool_use {', '.join(sorted(pending))} has no tool_result")
            pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    return problems
