"""The reduction ladder, declared as data: an ordered table of rungs, least loss first.

``STEPS`` is the single place a rung is declared: its name, the action kind it records, the
``TrimPolicy`` flag that turns it on, the function that runs it over a ``TrimState``, and whether it
removes messages or edits them. Everything else derives from this table: the engine runs the rungs in
this order; the decision's per-action counts and the ``x-budget-dropped-messages`` /
``x-budget-edited-messages`` headers come from ``ACTION_KINDS`` and ``REMOVING_ACTIONS``; each request
shape must declare how to write every editing action back into its own format (checked when the shape
registry is built).

A rung is tried in full before the next one, and the next one runs only while the request is still over
the budget: nothing is dropped when compacting was enough. Inside a rung, work goes oldest first, a whole
*cache step* at a time (``TrimState.advance``): a rung acts on every one of its candidates that starts
before its frontier, a multiple of the step on the history's token positions, so a growing conversation
is cut and compacted at the same places turn after turn (see ``engine``):

0. ``images`` (off by default): images older than the latest turn become a short placeholder;
1. ``soften_results``: every tool result keeps its head and its tail (``tool_result_soft_keep_chars``),
   all at once, before any of them is cut harder or leaves with its turn; small results and errors stay;
2. ``compact_old``: old tool results keep only their head and a marker; never the
   ``keep_recent_tool_results`` most recent ones (nor any in their cache step), small results, errors;
3. ``drop_old``: the oldest units after the opening context (whole turns; tool steps of a turn whose
   head is kept), a tool call always with all of its results;
4. ``shorten``: long assistant messages still present, oldest first (``tool_calls`` untouched);
5. ``drop_latest_steps``: the oldest tool steps of the latest turn's agent loop, never its last step;
6. ``drop_context``: rather than refuse, oldest first, the opening context but the task: user messages
   before it (a demonstration, AGENTS.md) and acknowledged context (a file added to the chat and its "Ok").
   System and developer messages and the task (the last user message before the first reply) never go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, get_args

from .report import (
    COMPACTED_MARKER,
    IMAGE_REMOVED_MARKER,
    SHORTENED_MARKER,
    SOFTENED_MARKER,
    ActionKind,
    content_chars,
    is_compacted,
    is_error_result,
    is_softened,
    message_text,
)

if TYPE_CHECKING:
    from .engine import TrimState


@dataclass(frozen=True)
class Step:
    name: str
    action: ActionKind
    #: the ``TrimPolicy`` flag that turns the rung on
    enabled_by: str
    run: Callable[[TrimState], None]
    #: True: the rung removes messages (counted as dropped); False: it rewrites them (counted as edited)
    removes: bool = False


def drop_old_images(state: TrimState) -> None:
    """Replace image parts of messages older than the latest turn with a placeholder."""
    def replace_images(index: int) -> None:
        message = state.messages[index]
        content = message.get("content")
        if state.editable(index) and isinstance(content, list) and any(_is_image(part) for part in content):
            replaced = [_image_placeholder() if _is_image(part) else part for part in content]
            state.rewrite(index, {**message, "content": replaced}, "images_removed")
    state.advance((index, partial(replace_images, index)) for index in range(state.latest_start))


def _tool_results(state: TrimState) -> list[int]:
    return [i for i, m in enumerate(state.messages) if m.get("role") in ("tool", "function")]


def _compactable(state: TrimState, index: int) -> bool:
    """A tool result a rung may rewrite: editable, not an error, big enough, not compacted yet (a softened
    result may still be compacted)."""
    original = state.messages[index]
    return (state.editable(index) and not is_compacted(state.current(index)) and not is_error_result(original)
            and content_chars(original) >= state.policy.tool_result_min_chars)


def soften_results(state: TrimState) -> None:
    """Every tool result keeps its head and its tail, all at once: a result's fate must not depend on its
    age, or each turn would rewrite the one that just aged (and the cached prefix with it). A result that
    arrives later is softened as it arrives."""
    keep_chars = state.policy.tool_result_soft_keep_chars
    tail_chars = keep_chars // 3

    def soften(index: int) -> None:
        text = message_text(state.messages[index])
        if _compactable(state, index) and not is_softened(state.current(index)) and len(text) > keep_chars:
            head, tail = text[: keep_chars - tail_chars], text[len(text) - tail_chars:] if tail_chars else ""
            state.rewrite_with_marker(index, head, tail,
                                      f"\n{SOFTENED_MARKER} by the gateway to fit the context budget: "
                                      "{chars} of {total} characters (~{tokens} tokens) removed from the middle]\n",
                                      "compacted")
    state.advance(((index, partial(soften, index)) for index in _tool_results(state)), whole=True)


def compact_old_results(state: TrimState) -> None:
    """Old tool results keep only their head. Old: in a cache step wholly before the one holding the
    ``keep_recent_tool_results``-th most recent result, so a result's fate changes only when a step
    boundary passes it; the recent ones are never compacted beyond softly."""
    results = _tool_results(state)
    keep = state.policy.keep_recent_tool_results
    if keep and len(results) <= keep:
        return  # every result is a recent one
    boundary = state.step_start(results[-keep]) if keep else None

    def compact(index: int) -> None:
        if _compactable(state, index):
            text = message_text(state.messages[index])
            state.rewrite_with_marker(index, text[: state.policy.tool_result_keep_chars], "",
                                      f"\n{COMPACTED_MARKER} by the gateway to fit the context budget: "
                                      "{chars} of {total} characters (~{tokens} tokens) removed]", "compacted")
    state.advance((index, partial(compact, index)) for index in results
                  if boundary is None or state.positions[index] < boundary)


def drop_old_units(state: TrimState) -> None:
    state.advance((unit.indexes[0], partial(state.drop_unit, unit)) for unit in state.units if not unit.latest)


def drop_latest_steps(state: TrimState) -> None:
    state.advance((unit.indexes[0], partial(state.drop_unit, unit)) for unit in state.units if unit.latest)


def drop_opening_context(state: TrimState) -> None:
    """Last, rather than refuse, oldest first: the opening user messages before the task (a demonstration,
    AGENTS.md) and acknowledged context (a file added to the chat and its "Ok"). The task stays."""
    state.advance((unit.indexes[0], partial(state.drop_unit, unit)) for unit in state.context_units)


def shorten_assistant_messages(state: TrimState) -> None:
    policy = state.policy

    def shorten(index: int) -> None:
        if not state.editable(index) or index == state.final_assistant:
            return
        text = message_text(state.current(index))
        if len(text) >= policy.assistant_min_chars and SHORTENED_MARKER not in text:
            state.rewrite_with_marker(index, text[: policy.assistant_keep_chars], "",
                                      f"\n{SHORTENED_MARKER} by the gateway to fit the context budget: "
                                      "{chars} of {total} characters (~{tokens} tokens) removed]", "shortened")
    state.advance((index, partial(shorten, index)) for index, message in enumerate(state.messages)
                  if message.get("role") == "assistant")


#: the ladder, in the order it runs
STEPS: tuple[Step, ...] = (
    Step("images", "images_removed", "drop_old_images", drop_old_images),
    Step("soften_results", "compacted", "soften_tool_results", soften_results),
    Step("compact_old", "compacted", "compact_tool_results", compact_old_results),
    Step("drop_old", "dropped", "drop_old_turns", drop_old_units, removes=True),
    Step("shorten", "shortened", "shorten_assistant_messages", shorten_assistant_messages),
    Step("drop_latest_steps", "dropped", "drop_latest_turn_steps", drop_latest_steps, removes=True),
    Step("drop_context", "dropped", "drop_opening_context", drop_opening_context, removes=True),
)
ACTION_KINDS: tuple[ActionKind, ...] = tuple(dict.fromkeys(step.action for step in STEPS))
REMOVING_ACTIONS: frozenset[str] = frozenset(step.action for step in STEPS if step.removes)
EDITING_ACTIONS: tuple[ActionKind, ...] = tuple(a for a in ACTION_KINDS if a not in REMOVING_ACTIONS)
assert sorted(ACTION_KINDS) == sorted(get_args(ActionKind)), "every ActionKind needs a rung"
assert not REMOVING_ACTIONS.intersection(EDITING_ACTIONS), "an action kind either removes or edits"


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
