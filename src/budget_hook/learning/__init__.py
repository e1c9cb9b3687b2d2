"""What the gateway learns from providers' answers (pure; the proxy adapter feeds it and shares it).

* ``corrections``: ``CorrectionBook`` (billed / estimated per deployment, a high quantile applied to later
  estimates) and ``LearnedWindows`` (the smallest window an overflow error named);
* ``overflow``: reads the window and the provider's prompt count out of an overflow error, and says
  whether a request quotes such wording itself (an error that echoes it must teach nothing);
* ``calibration``: the ``Calibration`` a decision counts with (learned correction, provider count), and
  when a provider count could change the decision (``needs_provider_count``).
"""

from .calibration import Calibration, CountBand, count_band, learnable, mocked, needs_provider_count, server_loop
from .corrections import (
    ANONYMOUS,
    IDLE_TEACHER_SECONDS,
    MAX_TEACHERS,
    Correction,
    CorrectionBook,
    LearnedWindow,
    LearnedWindows,
    LearningSettings,
    ServedFloor,
    teacher_of,
    window_floor,
)
from .overflow import Overflow, parse_overflow, quotes_overflow

__all__ = [
    "ANONYMOUS",
    "IDLE_TEACHER_SECONDS",
    "MAX_TEACHERS",
    "Calibration",
    "Correction",
    "CorrectionBook",
    "CountBand",
    "LearnedWindow",
    "LearnedWindows",
    "LearningSettings",
    "Overflow",
    "ServedFloor",
    "count_band",
    "learnable",
    "mocked",
    "needs_provider_count",
    "parse_overflow",
    "quotes_overflow",
    "server_loop",
    "teacher_of",
    "window_floor",
]
