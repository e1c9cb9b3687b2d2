"""The trimmer's knobs (declared once with their defaults and bounds; the YAML edge derives from them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PolicyError
from ..knobs import check_bounds, knob


@dataclass(frozen=True)
class TrimPolicy:
    """Trimmer knobs; defaults are what a production gateway should start with."""

    target_ratio: float = knob(1.0, gt=0, le=1, doc="aim every cut at this share of the budget (1: the budget "
                                                    "itself; lower drops content only to leave headroom)")
    cache_step_ratio: float = knob(0.2, ge=0, le=1, doc="a trim leaves this share of the budget free; the next "
                                                         "requests of the conversation are that trim plus what "
                                                         "they add (the cached prefix kept) until they outgrow "
                                                         "it (0: every request cut exactly to the budget)")
    keep_opening_context: bool = knob(True, doc="keep the opening context: the user messages before the first reply "
                                                "(task, AGENTS.md, environment) and acknowledged context (files "
                                                "added to the chat); only the last stages drop or reduce any")
    context_min_chars: int = knob(500, ge=0, doc="a user message of at least this many characters answered only by "
                                                 "a short acknowledgement is opening context")
    ack_max_chars: int = knob(200, ge=0, doc="an assistant reply of at most this many characters, without tool "
                                             "calls, is an acknowledgement")
    compact_tool_results: bool = knob(True, doc="compact older tool results to their head (+ marker), oldest first, "
                                                "when softening them all is not enough")
    tool_result_keep_chars: int = knob(500, ge=0, doc="characters of a compacted tool result that are kept")
    tool_result_min_chars: int = knob(1000, ge=0, doc="tool results shorter than this are never compacted")
    keep_recent_tool_results: int = knob(3, ge=0, doc="the newest tool results (and all that follows the oldest "
                                                      "of them) stay verbatim while older material can make the "
                                                      "room")
    reduce_recent_tool_results: bool = knob(True, doc="when nothing older can make the room, the newest tool results "
                                                      "keep their head and tail, cut only as far as needed")
    soften_tool_results: bool = knob(True, doc="older tool results keep their head and tail (the middle goes), oldest "
                                               "first, before any is compacted harder or dropped")
    soften_user_messages: bool = knob(False, doc="long older user messages (observations agents such as SWE-agent "
                                                 "send as user turns, pasted files; never the opening context or the "
                                                 "latest) keep their head and tail like tool results, before whole "
                                                 "turns are dropped (more kept, fewer cached prefixes)")
    tool_result_soft_keep_chars: int = knob(2000, ge=0, doc="characters of a softened tool result that are kept "
                                                            "(two thirds head, one third tail)")
    drop_old_turns: bool = knob(True, doc="drop the oldest tool steps, then questions with their answers, after "
                                          "the opening context, when compacting is not enough")
    pin_first_user_message: bool = knob(False, doc="never drop the first user message (kept anyway as opening "
                                                   "context while keep_opening_context is on)")
    shorten_assistant_messages: bool = knob(True, doc="shorten long older assistant messages (head + marker) where "
                                                      "tool results are compacted")
    assistant_keep_chars: int = knob(1000, ge=0, doc="characters of a shortened assistant message that are kept")
    assistant_min_chars: int = knob(2000, ge=0, doc="assistant messages shorter than this are never shortened")
    edit_latest_turn_history: bool = knob(True, doc="compact and shorten inside the latest turn's agent loop too")
    drop_latest_turn_steps: bool = knob(True, doc="when nothing older can make the room: drop the oldest tool steps "
                                                  "of the latest turn's agent loop (never its last step)")
    drop_opening_context: bool = knob(True, doc="rather than refuse: drop opening context but the task, oldest "
                                                "first (files added to the chat, a demonstration, AGENTS.md); the "
                                                "task always stays")
    reduce_opening_context: bool = knob(True, doc="rather than drop or refuse: opening context keeps its head and "
                                                 "tail, cut only as far as needed (the context before the task "
                                                 "first, the task last)")
    opening_min_chars: int = knob(1000, ge=0, doc="characters an opening message keeps at least when reduced")
    drop_old_images: bool = knob(False, doc="replace images older than the latest turn with a placeholder, with "
                                            "softening")
    notify_model: bool = knob(True, doc="tell the model, in the forwarded request, how many messages and tokens "
                                        "were removed")

    def __post_init__(self) -> None:
        check_bounds(self)
        # the ladder's order: compacting (a result's head) keeps no more than softening (its head and tail)
        if self.tool_result_keep_chars > self.tool_result_soft_keep_chars:
            raise PolicyError(f"tool_result_keep_chars ({self.tool_result_keep_chars}) must not exceed "
                              f"tool_result_soft_keep_chars ({self.tool_result_soft_keep_chars})")
