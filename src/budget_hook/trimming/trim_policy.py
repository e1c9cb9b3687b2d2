"""The trimmer's knobs (declared once with their defaults and bounds; the YAML edge derives from them)."""

from __future__ import annotations

from dataclasses import dataclass

from ..knobs import check_bounds, knob


@dataclass(frozen=True)
class TrimPolicy:
    """Trimmer knobs; defaults are what a production gateway should start with."""

    target_ratio: float = knob(0.9, gt=0, le=1, doc="trim to this share of the budget, not just under it")
    compact_tool_results: bool = knob(True, doc="step: compact old tool results (head + marker)")
    tool_result_keep_chars: int = knob(500, ge=0, doc="characters of a compacted tool result that are kept")
    tool_result_min_chars: int = knob(1000, ge=0, doc="tool results shorter than this are never compacted")
    keep_recent_tool_results: int = knob(3, ge=0, doc="the most recent tool results are never compacted")
    drop_old_turns: bool = knob(True, doc="step: drop the oldest whole turns")
    pin_first_user_message: bool = knob(False, doc="never drop the first user message")
    shorten_assistant_messages: bool = knob(True, doc="step: shorten long assistant messages (head + marker)")
    assistant_keep_chars: int = knob(1000, ge=0, doc="characters of a shortened assistant message that are kept")
    assistant_min_chars: int = knob(2000, ge=0, doc="assistant messages shorter than this are never shortened")
    edit_latest_turn_history: bool = knob(True, doc="compact and shorten inside the latest turn's agent loop too")
    drop_old_images: bool = knob(False, doc="step 0: replace images older than the latest turn with a placeholder")

    def __post_init__(self) -> None:
        check_bounds(self)
