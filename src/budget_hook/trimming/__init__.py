"""Where trimming happens: a structure-safe reduction ladder over a chat-shaped list of messages.

* ``steps``: the ladder as data (``STEPS``: one step per action kind, in order);
* ``engine``: ``trim_request`` and the ``TrimState`` the steps work on; ``CannotFitError`` when the
  protected part alone is over budget;
* ``structure``: turns (the unit that is dropped whole) and tool-call pairing checks;
* ``report``: what was done (``MessageAction``, ``TrimReport``), markers and content hashes;
* ``trim_policy``: the trimmer's knobs.

Every request shape is trimmed through this engine on its chat-shaped view (``budget_hook.shapes``).
"""

from .engine import check_native_fit, trim_request
from .report import (
                     COMPACTED_MARKER,
                     IMAGE_REMOVED_MARKER,
                     SHORTENED_MARKER,
                     ActionKind,
                     MessageAction,
                     TrimReport,
                     TrimResult,
                     content_hash,
                     message_text,
)
from .steps import ACTION_KINDS, EDITING_ACTIONS, REMOVING_ACTIONS, STEPS, Step, action_counts
from .trim_policy import TrimPolicy

__all__ = ["ACTION_KINDS", "COMPACTED_MARKER", "EDITING_ACTIONS", "IMAGE_REMOVED_MARKER", "REMOVING_ACTIONS",
           "SHORTENED_MARKER", "STEPS", "ActionKind", "MessageAction", "Step", "TrimPolicy", "TrimReport",
           "TrimResult", "action_counts", "check_native_fit", "content_hash", "message_text", "trim_request"]
