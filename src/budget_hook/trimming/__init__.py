"""Where trimming happens: a structure-safe reduction ladder over a chat-shaped list of messages.

* ``ladder``: the rungs, what may be done and where, as data (``REDUCTIONS``: one entry per kind of cut; ``STAGES``:
  the request's regions in the order their material is given up);
* ``state``: the ``TrimState`` the stages work on (the least lossy cuts that fit), below the ladder;
* ``engine``: ``trim_request``, the stages run over one ``TrimState`` (the request's own, or its growth
  anchor's, plus what was added: ``growth_anchor``); ``CannotFitError`` when even the last stage cannot fit the
  request;
* ``structure``: turns, drop units (a tool step at most) and tool-call pairing checks;
* ``report``: what was done (``MessageAction``, ``TrimReport``), markers and content hashes;
* ``trim_policy``: the trimmer's knobs.

Every request shape is trimmed through this engine on its chat-shaped view (``budget_hook.shapes``).
"""

from .engine import trim_request
from .ladder import ACTION_KINDS, EDITING_ACTIONS, REDUCTIONS, REMOVING_ACTIONS, STAGES, Reduction, Stage, action_counts
from .report import (
                     COMPACTED_MARKER,
                     IMAGE_PLACEHOLDER,
                     IMAGE_REMOVED_MARKER,
                     SHORTENED_MARKER,
                     ActionKind,
                     MessageAction,
                     TrimReport,
                     TrimResult,
                     check_native_fit,
                     content_hash,
                     message_text,
)
from .trim_policy import TrimPolicy

__all__ = ["ACTION_KINDS", "COMPACTED_MARKER", "EDITING_ACTIONS", "IMAGE_PLACEHOLDER", "IMAGE_REMOVED_MARKER",
           "REDUCTIONS", "REMOVING_ACTIONS", "SHORTENED_MARKER", "STAGES", "ActionKind", "MessageAction", "Reduction",
           "Stage", "TrimPolicy", "TrimReport", "TrimResult", "action_counts", "check_native_fit", "content_hash",
           "message_text", "trim_request"]
