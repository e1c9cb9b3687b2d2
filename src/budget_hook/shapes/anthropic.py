"""The Anthropic ``/v1/messages`` shape: counted and trimmed in its own format (pure; never mutates input).

The body is seen through a chat-shaped *view*, one view message per unit that can be trimmed: each
``tool_result`` block is its own view message (images inline), the remaining blocks of a native message
another. The same view is counted (``count_anthropic``) and trimmed; the generic trimmer (same
priorities, same invariants) decides on it, and every decision is written back to the native blocks it
came from. So, in Anthropic terms:

* top-level ``system`` is the view's system message; ``tools`` become function tools (``input_schema``
  -> ``parameters``), ``tool_choice`` and ``output_format`` are mapped; ``thinking`` text, redacted
  thinking data and any other block (server tools, search results) are counted as their text / JSON;
  earlier turns' thinking is not counted (Anthropic strips and does not bill it);
* a ``tool_use`` block and its ``tool_result`` leave together (one turn's assistant tool call and its
  answer in the view); text or images a user message sends after its results are a user message of their
  own after them in the view (as LiteLLM's chat translation has them), where a turn starts, so the trimmer
  protects them as a chat user message; the write-back keeps results first and roles alternating;
* compacting a tool result keeps the block and its ``tool_use_id`` and replaces its content with the
  head and a marker; results with ``is_error: true`` are kept;
* an assistant message carrying ``thinking`` / ``redacted_thinking`` (signed by Anthropic) or server-tool
  blocks is never edited: it stays whole or leaves with its whole turn;
* prompt caching: everything up to the last ``cache_control`` breakpoint in ``messages`` is protected
  in a first pass; only when the request cannot fit otherwise is it trimmed again without that
  protection, and the report's ``notes`` say the cached prefix was rewritten.

The reported ``tokens_after`` is a fresh count of the native result, and it must be within the budget.
A block uses Anthropic's own sentence, ``prompt is too long: N tokens > M maximum``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..budget import OUTPUT_TOKEN_FIELDS, Budget
from ..counting import TokenCounter, canonical_json, media
from ..counting.parts import image_part, unreadable_as_sent
from ..errors import MalformedRequestError
from ..trimming import IMAGE_PLACEHOLDER, MessageAction, TrimPolicy, TrimResult, content_hash, message_text
from .anthropic_blocks import (
    convert_message,
    current_turn_start,
    envelope,
    rewritable_block,
    thinking_opening,
    tool_result_content,
)
from .base import (
    CACHE_PREFIX_NOTE,
    ConversationShape,
    Placed,
    View,
    merge_new_neighbours,
    place_notice,
    touched_parts,
    unreadable_parts,
    view_decisions,
)
from .references import anthropic_references

# --- the view ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    message: int                   # native message index
    blocks: tuple[int, ...] | None  # native block indexes; None: the whole (string-content) message


def _has_cache_control(block: Any) -> bool:
    if type(block) is not dict and not isinstance(block, Mapping):  # dict first: the ABC check is slow
        return False
    if block.get("cache_control") is not None:
        return True
    nested = block.get("content")  # a breakpoint may sit inside a tool_result's content
    return isinstance(nested, list) and any(_has_cache_control(inner) for inner in nested)


def _parts(content: Any) -> list[Any]:
    """A message's content (a string, or a list of blocks or parts) as a list of blocks."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


#: a native message's part of the view: (the message, keep_thinking, its view messages, each one's native
#: blocks (None: the whole message), which of them are never edited)
_Converted = tuple[Any, bool, list[dict[str, Any]], list["tuple[int, ...] | None"], tuple[int, ...]]
#: per thread, the conversions of the view ``_apply`` wrote back, for the view of the body it returned (the
#: native recount that follows at once): its untouched messages are the same objects, converted alike
_HANDOFF = threading.local()


def build_view(body: Mapping[str, Any]) -> View:
    """The chat-shaped view: one view message per unit that can be trimmed (see the module's notes)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise MalformedRequestError("messages", "missing or not a list")
    pending = getattr(_HANDOFF, "pending", None)
    _HANDOFF.pending = None
    earlier: Mapping[int, _Converted] = pending[1] if pending is not None and pending[0] is body else {}
    # The envelope only (system, tools, options): messages are converted one by one below, with their map.
    converted = envelope(body)
    view_messages: list[dict[str, Any]] = []
    refs: list[_Ref | None] = []
    if converted["messages"] and converted["messages"][0]["role"] == "system" and body.get("system"):
        view_messages.append(converted["messages"][0])
        refs.append(None)
    native = body["messages"]
    current_turn = current_turn_start(native)
    last_breakpoint = -1
    no_edit: set[int] = set()
    for index, message in enumerate(native):
        keep_thinking = index >= current_turn
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(_has_cache_control(block) for block in content):
            last_breakpoint = index
        found = earlier.get(id(message))
        if found is None or found[0] is not message or found[1] != keep_thinking:
            found = (message, keep_thinking, *_convert(message, f"messages[{index}]", keep_thinking))
        _, _, parts, blocks, frozen = found
        if frozen:
            no_edit.update(len(view_messages) + offset for offset in frozen)
        view_messages.extend(parts)
        refs.extend([_Ref(index, block) for block in blocks])
    cache_prefix = frozenset(i for i, ref in enumerate(refs) if ref is not None and ref.message <= last_breakpoint)
    opening = thinking_opening(native, current_turn, body.get("thinking"))  # kept: the turn opens with its thinking
    keep = frozenset(i for i, ref in enumerate(refs) if ref is not None and ref.message == opening)
    request = {**converted, "messages": view_messages}
    return View(request, tuple(refs), no_edit=frozenset(no_edit), protected=cache_prefix, keep=keep)


def _conversions(body: Mapping[str, Any], view: View) -> dict[int, _Converted]:
    """``build_view``'s conversions of ``body``'s messages, read back from its ``view`` (by message identity)."""
    native = body["messages"]
    current_turn = current_turn_start(native)
    groups: dict[int, list[int]] = {}
    for view_index, ref in enumerate(view.refs):
        if ref is not None:
            groups.setdefault(ref.message, []).append(view_index)
    messages = view.request["messages"]
    return {id(native[index]): (native[index], index >= current_turn, [messages[i] for i in indexes],
                                [view.refs[i].blocks for i in indexes],
                                tuple(k for k, i in enumerate(indexes) if i in view.no_edit))
            for index, indexes in groups.items()}


_Parts = tuple[list[dict[str, Any]], list["tuple[int, ...] | None"], tuple[int, ...]]


def _convert(message: Any, where: str, keep_thinking: bool) -> _Parts:
    """One native message's view messages, their native blocks and which are never edited (offsets among them)."""
    content = message.get("content") if isinstance(message, Mapping) else None
    parts: list[dict[str, Any]] = []
    blocks: list[tuple[int, ...] | None] = []
    frozen: list[int] = []
    if not isinstance(content, list):
        parts = list(convert_message(message, where, keep_thinking=keep_thinking, inline_tool_images=True))
        return parts, [None] * len(parts), ()
    results = [i for i, block in enumerate(content) if _kind(block) == "tool_result"]
    result_set = set(results)
    rest = [i for i in range(len(content)) if i not in result_set]
    for block_index in results:
        single = {"role": message.get("role"), "content": [content[block_index]]}
        rewritable = rewritable_block(content[block_index])
        for part in convert_message(single, f"{where}.content[{block_index}]", keep_thinking=keep_thinking,
                                     inline_tool_images=True):
            if not rewritable:  # a document or search result in it: stays whole or leaves with its call
                frozen.append(len(parts))
            parts.append(part)
            blocks.append((block_index,))
    if rest or not results:
        # Text or images the user sends after tool results (an instruction mid-loop, Claude Code's system
        # reminders) are a user message of their own after the results, as LiteLLM's chat translation has them:
        # the turn starts there (as ``current_turn_start`` reads it), and the trimmer protects them as it does a
        # chat user message; the write-back keeps them in one native message with the results that stay.
        remaining = {"role": message.get("role"), "content": [content[i] for i in rest]}
        signed = any(isinstance(content[i], Mapping) and not rewritable_block(content[i]) for i in rest)
        for part in convert_message(remaining, where, keep_thinking=keep_thinking, inline_tool_images=True):
            if signed:  # signed thinking, server-tool blocks, documents...: stays whole or leaves with its turn
                frozen.append(len(parts))
            parts.append(part)
            blocks.append(tuple(rest))
    return parts, blocks, tuple(frozen)


def anthropic_to_openai_chat(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-shaped request a ``/v1/messages`` body is counted and trimmed as (a new dict)."""
    return dict(build_view(body).request)


def count_anthropic(body: Mapping[str, Any], counter: TokenCounter) -> int:
    return SHAPE.count(body, counter)


def trim_anthropic(body: Mapping[str, Any], *, counter: TokenCounter, budget: Budget,
                   policy: TrimPolicy = TrimPolicy()) -> TrimResult:
    return SHAPE.trim(body, counter=counter, budget=budget, policy=policy)


# --- writing decisions back -----------------------------------------------------------------------------


def _compacted(blocks: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    """A tool result's text becomes the edited text; its other blocks (images, documents) stay."""
    def written(block: Any) -> Any:
        inner = block.get("content")
        if not isinstance(inner, list):
            return {**block, "content": message_text(edited)}
        return {**block, "content": [{"type": "text", "text": message_text(edited)},
                                     *(b for b in inner if _kind(b) != "text")]}
    return [written(b) if _kind(b) == "tool_result" else b for b in blocks]


def _images_removed(blocks: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    placeholder = {"type": "text", "text": _placeholder(edited)}
    out: list[Any] = []
    for block in blocks:
        if _kind(block) == "image":
            out.append(placeholder)
        elif _kind(block) == "tool_result" and isinstance(block.get("content"), list):
            out.append({**block, "content": [placeholder if _kind(b) == "image" else b for b in block["content"]]})
        else:
            out.append(block)
    return out


def _shortened(blocks: Sequence[Any], edited: Mapping[str, Any]) -> list[Any]:
    """All text blocks become one, at the first text block's place; other blocks stay."""
    out, merged = [], False
    for block in blocks:
        if _kind(block) != "text":
            out.append(block)
        elif not merged:
            out.append({"type": "text", "text": message_text(edited)})
            merged = True
    return out


#: per editing action: the native blocks a view message came from, and its edited version -> new blocks
WRITERS = {"compacted": _compacted, "images_removed": _images_removed, "shortened": _shortened}


def _kind(block: Any) -> str | None:
    """A block's ``type`` when it is a string (a client's ``{"type": {...}}`` is no known block)."""
    kind = block.get("type") if type(block) is dict or isinstance(block, Mapping) else None
    return kind if isinstance(kind, str) else None


def _apply(body: Mapping[str, Any], view: View, result: TrimResult) -> dict[str, Any]:
    """Carry the view's decisions over to the native messages and blocks."""
    actions, edited_views = view_decisions(view, result)
    native = body["messages"]
    removed_messages: set[int] = set()
    replaced_messages: dict[int, Any] = {}
    removed_blocks: dict[int, set[int]] = {}   # native message -> blocks that leave
    written: dict[int, dict[int, list[Any]]] = {}  # native message -> first block of a ref -> new blocks
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
        edited = edited_views[view_index]
        if ref.blocks is None:  # a string-content message: its new text is the edited view message's
            replaced_messages[ref.message] = message_text(edited)
            continue
        content = native[ref.message]["content"]
        new_blocks = WRITERS[action.action]([content[i] for i in sorted(ref.blocks)], edited)
        removed_blocks.setdefault(ref.message, set()).update(ref.blocks)
        written.setdefault(ref.message, {})[min(ref.blocks)] = new_blocks

    placed: list[Placed] = []
    for index, message in enumerate(native):
        if index in removed_messages:
            continue
        if index in replaced_messages:
            placed.append((index, {**message, "content": replaced_messages[index]}))
            continue
        gone = removed_blocks.get(index)
        if not gone:
            placed.append((index, message))
            continue
        inserts = written.get(index, {})
        blocks: list[Any] = []
        for block_index, block in enumerate(message["content"]):
            blocks.extend(inserts.get(block_index, ()))
            if block_index not in gone:
                blocks.append(block)
        if blocks:
            placed.append((index, {**message, "content": blocks}))
    notice = result.report.notice
    if notice is not None:
        ref = view.refs[notice.after] if notice.after is not None else None
        placed = place_notice(placed, ref.message if ref is not None else None,
                              {"role": "user", "content": [{"type": "text", "text": notice.text}]})
    # Anthropic requires alternating roles: what the trim made neighbours (the opening context and the next
    # kept turn, the notice and either) becomes one message.
    new_body = {**body, "messages": merge_new_neighbours(placed, lambda m: m.get("role"), _merge)}
    _HANDOFF.pending = (new_body, _conversions(body, view))
    return new_body


def _merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    return {**first, "content": _parts(first.get("content")) + _parts(second.get("content"))}


def _placeholder(edited: Mapping[str, Any]) -> str:
    content = edited.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and "image removed" in str(part.get("text", "")):
                return str(part["text"])
    return IMAGE_PLACEHOLDER


def _native_action(action: MessageAction, view: View, body: Mapping[str, Any]) -> MessageAction:
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


def _touched_content(body: Mapping[str, Any], action: MessageAction) -> str:
    """The original text of a touched message, or of its one block."""
    content = touched_parts(body, "messages", "content", action)
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else []:
        if _kind(block) == "tool_result":
            inner = block.get("content")
            texts.append(inner if isinstance(inner, str) else tool_result_content(inner, "content")[0])
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        else:
            texts.append(canonical_json(block))
    return "\n".join(texts)


#: content block types only Anthropic's format has (a chat body never carries them)
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                               "server_tool_use", "web_search_tool_result", "search_result"})


def _unreadable_block(block: Any) -> str | None:
    if _kind(block) == "tool_result" and isinstance(block.get("content"), list):  # what a tool returned
        return next((f"{reason} (its content[{i}])" for i, inner in enumerate(block["content"])
                     if (reason := _unreadable_block(inner))), None)
    if _kind(block) == "container_upload":
        return "a file uploaded to the container by id: its content is not in the request"
    if _kind(block) == "image":  # as the view has it (a PDF a bridge to Gemini sends as one)
        return unreadable_as_sent(image_part(block))
    if _kind(block) != "document":
        return None
    source = block.get("source") if isinstance(block.get("source"), Mapping) else {}
    if source.get("type") in ("url", "file"):
        return f"a document by {source.get('type')}: its content is not in the request"
    if source.get("type") == "base64" and str(source.get("media_type", "application/pdf")) == "application/pdf":
        return media.unreadable({"type": "file", "file": {"file_data": "data:application/pdf;base64,"
                                                                       + str(source.get("data", ""))}})
    return None


def _unreadable(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    return unreadable_parts(body.get("messages"), "messages", "content", _unreadable_block)


def _detect(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    if "system" in body or "anthropic_version" in body:
        return True
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if _kind(block) in _ANTHROPIC_BLOCKS or (_kind(block) == "image" and isinstance(block, Mapping)
                                                     and "source" in block):
                return True
    return False


#: the output room below which lowering max_tokens is no remedy (Claude Code needs 1,000 + 3,000)
USEFUL_OUTPUT = 4096


def _limit(facts: Mapping[str, Any]) -> int | None:
    """What the gateway lets input + max_tokens reach: the window less the safety margin."""
    window, margin = facts.get("window"), facts.get("safety_margin") or 0
    return window - margin if isinstance(window, int) and isinstance(margin, int) else None


#: Responses API fields a ``/v1/messages`` request may not carry (``prompt_fields``): LiteLLM forwards them, uncounted,
#: into the Responses call it makes for an OpenAI deployment (1.103 re-sent it refused without the hooks: 9,015 > 8,000)
RESPONSES_ONLY_FIELDS = ("instructions", "previous_response_id", "conversation", "text", "prompt")


def _overflow_wording(facts: Mapping[str, Any], tokens_before: int | None) -> str:
    # Anthropic's own sentences, which Claude Code and the Anthropic SDKs' users react to, chosen as Anthropic
    # chooses: "prompt is too long" when the input alone is too long (Claude Code compacts), the max_tokens
    # sentence when the input fits with room for an answer (``USEFUL_OUTPUT``) and only input + max_tokens do
    # not (Claude Code lowers max_tokens to limit - input - 1,000, at least 3,000, and retries, which then fits:
    # no compaction).
    tokens = facts.get("tokens_after_trimming", tokens_before)
    limit, cap, reserve = _limit(facts), facts.get("cap"), facts.get("output_reserve")
    if isinstance(tokens, int) and limit is not None and isinstance(reserve, int) and \
            tokens + USEFUL_OUTPUT <= limit and facts.get("output_reserve_source") == "request" and \
            (cap is None or tokens <= cap):
        return _reserve_wording({**facts, "tokens_before": tokens}, tokens)
    return f"prompt is too long: {tokens} tokens > {facts.get('budget')} maximum."


def _reserve_wording(facts: Mapping[str, Any], tokens_before: int | None) -> str:
    # Anthropic's sentence when input and max_tokens together exceed the window: clients (Claude Code, the
    # SDKs' users) lower max_tokens and retry on it. The limit named is the window less the gateway's safety
    # margin, so that the max_tokens a client derives from it fits the budget.
    tokens = facts.get("tokens_before", tokens_before)
    return (f"input length and `max_tokens` exceed context limit: {tokens} + {facts.get('output_reserve')} > "
            f"{_limit(facts)}, decrease input length or `max_tokens` and try again.")


def _problems(body: Mapping[str, Any]) -> list[str]:
    messages = body.get("messages")
    return anthropic_pairing_problems(messages) if isinstance(messages, list) else []


SHAPE = ConversationShape(
    name="anthropic",
    call_types=frozenset({"anthropic_messages", "aanthropic_messages"}),
    routes=("/v1/messages",),
    metadata_key="litellm_metadata",
    output_token_fields=OUTPUT_TOKEN_FIELDS,
    content_fields=("messages", "system", "tools", "tool_choice", "output_format", "output_config"),
    param="messages",
    output_param="max_tokens",
    detect=_detect,
    overflow_wording=_overflow_wording,
    reserve_wording=_reserve_wording,
    view=build_view,
    apply=_apply,
    writers=WRITERS,
    native_action=_native_action,
    problems=_problems,
    touched_content=_touched_content,
    unreadable=_unreadable,
    references=anthropic_references,
    # the proxy fills a stored prompt in before the hook only for chat and Responses calls; LiteLLM fills this one
    # in after both hooks (when it bridges the call, and on the way to Claude: a 21k-token template reached 16k);
    # and the Responses API's own fields, which LiteLLM forwards when it serves the call through that API
    prompt_fields=("prompt_id", *RESPONSES_ONLY_FIELDS),
    protected_note=CACHE_PREFIX_NOTE,
)
