"""The ladder: what the trimmer may do, and where, declared as data. Its rungs are ``REDUCTIONS`` (what can
be done to one message or unit) and ``STAGES`` (the regions of the request, in the order their material is
given up). A stage works on the ``state.TrimState`` below it; ``engine`` runs the stages. (A "step" is
never a rung: a *tool step* is an assistant message with its results; the *room* is what a trim leaves
free for the next requests of the conversation, ``cache_step_ratio`` x budget.)

``REDUCTIONS`` is the single place an action kind is declared: its name, the action it records, the
``TrimPolicy`` flag that turns it on, and whether it removes messages or edits them. Everything else
derives from it: the decision's per-action counts and the ``x-budget-dropped-messages`` /
``x-budget-edited-messages`` headers come from ``ACTION_KINDS`` and ``REMOVING_ACTIONS``; each request
shape must declare how to write every editing action back into its own format (checked when the shape
registry is built).

Reductions by loss, per message: **soften** (a tool result keeps its head and tail), **compact** (a tool
result keeps its head; a long assistant message is **shortened** to its head), **drop** (a unit leaves:
one tool step, or an older turn's question with its answer); **images** (opt-in) replace old images with a
placeholder at the soften level. Graded **reduce** keeps a message's head and tail, cutting only what the
remaining excess needs.

``STAGES``, the regions, least needed first; a stage runs only while the request is over the budget:

1. ``older_history``: everything before the latest user message but the opening context;
2. ``latest_loop``: the latest turn's agent loop (never its last step nor its final reply);
3. ``opening_context``: opening context but the task, oldest first (a demonstration, AGENTS.md, a
   repository map, files added to the chat): each cut to the excess (head and tail) when that is enough,
   else dropped whole;
4. ``reduce_task``: the task, graded to the excess (head and tail). Then the request is refused.

Within each history region the trimmer chooses the least lossy cuts that fit (``TrimState.settle``):
tool results softened oldest first along the history, the one at the frontier graded; when softening the
whole region cannot fit, the oldest units leave first, as few as fit; compaction only when nothing
droppable is left. The region's newest tool results (the ``keep_recent_tool_results`` newest of the
request) and what came after the oldest of them stay verbatim while older material can make the room;
then the newest are cut graded to the excess, and their steps leave last.

A stage that leaves room (``Stage.leaves_room``: the two history regions) cuts ``cache_step_ratio`` x budget
below the budget, so the requests that extend this one are forwarded as this trim plus what they add
(``engine.growth_anchor``); the last stages cut only as far as the request needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from .report import ActionKind
from .state import TrimState


@dataclass(frozen=True)
class Reduction:
    """One kind of thing the trimmer may do to a message or unit."""

    name: str
    action: ActionKind
    #: the ``TrimPolicy`` flag that turns it on
    enabled_by: str
    #: True: it removes messages (counted as dropped); False: it rewrites them (counted as edited)
    removes: bool = False


@dataclass(frozen=True)
class Stage:
    """A region of the request whose material is given up, in ``STAGES`` order."""

    name: str
    run: Callable[[TrimState], None]
    #: its cuts leave the room a growing conversation grows into (``cache_step_ratio``); False: a last
    #: resort, cut only as far as the request needs
    leaves_room: bool = True


#: what can be done, lightest first (the order a message's reductions are tried in)
REDUCTIONS: tuple[Reduction, ...] = (
    Reduction("images", "images_removed", "drop_old_images"),
    Reduction("soften", "compacted", "soften_tool_results"),
    Reduction("soften_user", "shortened", "soften_user_messages"),
    Reduction("compact", "compacted", "compact_tool_results"),
    Reduction("shorten", "shortened", "shorten_assistant_messages"),
    Reduction("drop", "dropped", "drop_old_turns", removes=True),
    Reduction("drop_latest_steps", "dropped", "drop_latest_turn_steps", removes=True),
    Reduction("reduce_recent", "compacted", "reduce_recent_tool_results"),
    Reduction("drop_context", "dropped", "drop_opening_context", removes=True),
    Reduction("reduce_opening", "shortened", "reduce_opening_context"),
)
ACTION_KINDS: tuple[ActionKind, ...] = tuple(dict.fromkeys(r.action for r in REDUCTIONS))
REMOVING_ACTIONS: frozenset[str] = frozenset(r.action for r in REDUCTIONS if r.removes)
EDITING_ACTIONS: tuple[ActionKind, ...] = tuple(a for a in ACTION_KINDS if a not in REMOVING_ACTIONS)
assert sorted(ACTION_KINDS) == sorted(get_args(ActionKind)), "every ActionKind needs a reduction"
assert not REMOVING_ACTIONS.intersection(EDITING_ACTIONS), "an action kind either removes or edits"


def older_history(state: TrimState) -> None:
    policy = state.policy
    state.settle(lambda i: i < state.latest_start, drop=policy.drop_old_turns, latest=False)


def latest_loop(state: TrimState) -> None:
    policy = state.policy
    state.settle(lambda i: i >= state.latest_start, drop=policy.drop_latest_turn_steps, latest=True,
                 edit=policy.edit_latest_turn_history)


def opening_context(state: TrimState) -> None:
    """Rather than refuse, oldest first: the opening user messages before the task (a demonstration,
    AGENTS.md, a repository map) and acknowledged context (a file added to the chat and its "Ok"). Each
    keeps its head and tail, cut only as far as the remaining excess needs, when that is enough
    (``reduce_opening_context``, never under ``opening_min_chars``); otherwise it leaves whole
    (``drop_opening_context``) and the next one is looked at. The task stays."""
    policy = state.policy
    for unit in state.context_units:
        if state.fits():
            return
        users = [i for i in unit.indexes if state.opening_reducible(i)]
        if policy.reduce_opening_context:
            for index in users:
                state.reduce(index, floor=policy.opening_min_chars, action="shortened")
        if not state.fits() and policy.drop_opening_context:
            state.drop_unit(unit)


def reduce_task(state: TrimState) -> None:
    """Rather than refuse: the task keeps its head and tail, cut only as far as the remaining excess needs
    (Gemini CLI sends its session context and a long first prompt as one message, and exits on a block)."""
    if state.policy.reduce_opening_context and state.task is not None and state.opening_reducible(state.task):
        state.reduce(state.task, floor=state.policy.opening_min_chars, action="shortened")


#: the regions, in the order their material is given up
STAGES: tuple[Stage, ...] = (
    Stage("older_history", older_history),
    Stage("latest_loop", latest_loop),
    Stage("opening_context", opening_context, leaves_room=False),
    Stage("reduce_task", reduce_task, leaves_room=False),
)


def action_counts(actions: Any) -> dict[str, int]:
    """How many messages each action kind touched, every kind present (zero when unused)."""
    counts: dict[str, int] = dict.fromkeys(ACTION_KINDS, 0)
    for action in actions:
        counts[action.action] = counts.get(action.action, 0) + 1
    return counts
