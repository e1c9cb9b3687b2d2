"""The trimming steps, declared as data: an ordered table, one step per action kind.

``STEPS`` is the single place a step is declared: its action kind, the ``TrimPolicy`` flag that turns it
on, the function that runs it over a ``TrimState``, and whether it removes messages or edits them.
Everything else derives from this table: the engine runs the steps in this order; the decision's
per-action counts and the ``x-budget-dropped-messages`` / ``x-budget-edited-messages`` headers come from
``ACTION_KINDS`` and ``REMOVING_ACTIONS``; each request shape must declare how to write every editing
action back into its native format (checked when the shape registry is built).

Each step works until the request fits the target, in an order that does not depend on the budget
(so a larger budget never keeps fewer tokens):

0. ``images_removed`` (off by default): images older than the latest turn become a short placeholder;
1. ``compacted``: old tool results, oldest first, keep their head and a marker; never the
   ``keep_recent_tool_results`` most recent ones, small results, errors, or one already compacted;
2. ``dropped``: the oldest whole turns (a tool call always leaves with all of its results);
3. ``shortened``: long assistant messages still present, oldest first (``tool_calls`` untouched).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from .report import (
    COMPACTED_MARKER,
    IMAGE_REMOVED_MARKER,
    SHORTENED_MARKER,
    ActionKind,
    content_chars,
    is_compacted,
    is_error_result,
    message_text,
)

if TYPE_CHECKING:
    from .engine import TrimState


@dataclass(frozen=True)
class Step:
    action: ActionKind
    #: the ``TrimPolicy`` flag that turns the step on
    enabled_by: str
    run: Callable[[TrimState], None]
    #: True: the step removes messages (counted as dropped); False: it rewrites them (counted as edited)
    removes: bool = False


def drop_old_images(state: TrimState) -> None:
    """Replace image parts of messages older than the latest turn with a placeholder."""
    for index, message in enumerate(state.messages):
        if state.fits() or state.in_latest_turn(index):
            return
        content = message.get("content")
        if not state.editable(index) or not isinstance(content, list):
            continue
        if any(_is_image(part) for part in content):
            replaced = [_image_placeholder() if _is_image(part) else part for part in content]
            state.rewrite(index, {**message, "content": replaced}, "images_removed")


def compact_tool_results(state: TrimState) -> None:
    policy = state.policy
    results = [i for i, m in enumerate(state.messages) if m.get("role") in ("tool", "function")]
    recent = set(results[max(0, len(results) - policy.keep_recent_tool_results):])
    for index in results:
        if state.fits():
            return
        message = state.messages[index]
        if index in recent or not state.editable(index) or is_error_result(message) or is_compacted(message):
            continue
        text = message_text(message)
        original_chars = content_chars(message)
        if original_chars < policy.tool_result_min_chars:
            continue
        head = text[: policy.tool_result_keep_chars]
        removed = original_chars - len(head)
        marker = (f"\n{COMPACTED_MARKER} by the gateway to fit the context budget: {removed} of "
                  f"{original_chars} characters (~{state.tokens[index]} tokens) removed]")
        state.rewrite(index, {**message, "content": head + marker}, "compacted")


def drop_old_turns(state: TrimState) -> None:
    protected = state.protected
    for turn in state.turns[:-1]:
        if state.fits():
            return
        if protected and not protected.isdisjoint(turn.indexes):
            continue  # a turn is dropped whole or not at all: partial drops could orphan tool results
        droppable = [i for i in turn.indexes if state.alive[i] and not state.never_touched(i)]
        if not droppable:
            continue
        for index in droppable:
            state.drop(index)
        state.dropped_turns.append(turn.number)


def shorten_assistant_messages(state: TrimState) -> None:
    policy = state.policy
    for index, message in enumerate(state.messages):
        if state.fits():
            return
        if message.get("role") != "assistant" or index == state.final_assistant or not state.editable(index):
            continue
        current = state.edited.get(index, message)
        text = message_text(current)
        if len(text) < policy.assistant_min_chars or SHORTENED_MARKER in text:
            continue
        head = text[: policy.assistant_keep_chars]
        marker = (f"\n{SHORTENED_MARKER} by the gateway to fit the context budget: "
                  f"{len(text) - len(head)} of {len(text)} characters removed]")
        state.rewrite(index, {**current, "content": head + marker}, "shortened")


#: the ladder, in the order it runs
STEPS: tuple[Step, ...] = (
    Step("images_removed", "drop_old_images", drop_old_images),
    Step("compacted", "compact_tool_results", compact_tool_results),
    Step("dropped", "drop_old_turns", drop_old_turns, removes=True),
    Step("shortened", "shorten_assistant_messages", shorten_assistant_messages),
)
ACTION_KINDS: tuple[ActionKind, ...] = tuple(step.action for step in STEPS)
REMOVING_ACTIONS: frozenset[str] = frozenset(step.action for step in STEPS if step.removes)
EDITING_ACTIONS: tuple[ActionKind, ...] = tuple(step.action for step in STEPS if not step.removes)
assert sorted(ACTION_KINDS) == sorted(get_args(ActionKind)), "every ActionKind needs exactly one step"


def action_counts(actions: Any) -> dict[str, int]:
    """How many messages each action kind touched, every kind present (zero when unused)."""
    counts: dict[str, int] = dict.fromkeys(ACTION_KINDS, 0)
    for action in actions:
        counts[action.action] = counts.get(action.action, 0) + 1
    return counts


_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in _IMAGE_PART_TYPES


def _image_placeholder() -> dict[str, str]:
    return {"type": "text", "text": f"{IMAGE_REMOVED_MARKER} by the gateway to fit the context budget]"}
