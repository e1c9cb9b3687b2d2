"""What the providers taught us: a per-deployment count correction and learned windows (pure; no I/O).

Contract:

* ``CorrectionBook.add(key, estimate, billed)`` keeps the ratio billed / estimate of one response of the
  deployment ``key`` (a bounded window of the most recent ``window`` ratios; small requests, whose
  framing dominates, are not kept). ``correction(keys)`` is the largest correction over ``keys`` (the
  deployments a request may go to): per key, the ``quantile`` of its ratios once it has ``min_samples``,
  clamped to ``[min_factor, max_factor]``; None when no key has learned anything.
* ``LearnedWindows.learn(key, window)`` keeps the smallest window a provider's overflow error named for
  ``key``, for ``ttl`` seconds; ``window(keys)`` is the smallest over ``keys``.

Both are thread-safe and bounded (``MAX_KEYS`` keys). ``replace`` installs what another instance shared
(see ``budget_hook.proxy.shared``): the shared list is the truth, the local one a cache of it.

Why the factor never goes below 1.0 by default: every client's responses feed the same window, so a
client that sent text the estimate over-counts (or a flood of it) could otherwise lower everyone's counts
below what the provider bills, and the window guarantee would go. Raising is bounded by ``max_factor``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: deployments remembered at most (keys come from the router's deployment ids)
MAX_KEYS = 4096


@dataclass(frozen=True)
class LearningSettings:
    """How corrections are learned (``callback_settings.budget_hook.learning``)."""

    enabled: bool = True
    #: ratios kept per deployment (the most recent)
    window: int = 200
    #: which quantile of billed/estimate is applied (a high one: under-counting is what breaks the window)
    quantile: float = 0.95
    #: ratios needed before a deployment's correction is applied
    min_samples: int = 20
    min_factor: float = 1.0
    max_factor: float = 1.5
    #: responses billed fewer input tokens than this are not learned from
    min_billed_tokens: int = 100
    #: how long a window learned from an overflow error is kept
    window_ttl_seconds: float = 24 * 3600.0
    #: share through LiteLLM's Redis when it has one (``auto``), or keep it per process (``off``)
    share: str = "auto"
    #: how often a proxy re-reads the shared state of a deployment (seconds), and how long it waits for Redis
    sync_seconds: float = 1.0
    redis_timeout_seconds: float = 0.2


@dataclass(frozen=True)
class Correction:
    """The factor applied to an estimate, and where it came from."""

    factor: float
    samples: int
    key: str
    source: str = "learned"

    def describe(self) -> str:
        return f"x{self.factor:.3f} ({self.samples} responses)"

    def as_dict(self) -> dict[str, object]:
        return {"factor": self.factor, "samples": self.samples, "deployment": self.key, "source": self.source}


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank, rounding up: never below the true quantile)."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


class CorrectionBook:
    def __init__(self, settings: LearningSettings | None = None) -> None:
        self.settings = settings or LearningSettings()
        self._ratios: OrderedDict[str, deque[float]] = OrderedDict()
        #: the factor per key, computed once per change of its ratios (asked on every request)
        self._factors: dict[str, float | None] = {}
        self._lock = threading.Lock()

    def ratio(self, estimate: int, billed: int) -> float | None:
        """The ratio one response teaches, or None when it teaches nothing (too small, nonsense)."""
        if not (isinstance(estimate, int) and isinstance(billed, int)) or estimate <= 0:
            return None
        if billed < self.settings.min_billed_tokens:
            return None
        return round(billed / estimate, 4)

    def add(self, key: str, estimate: int, billed: int) -> float | None:
        ratio = self.ratio(estimate, billed)
        if ratio is not None:
            self.add_ratio(key, ratio)
        return ratio

    def add_ratio(self, key: str, ratio: float) -> None:
        with self._lock:
            ratios = self._ratios.get(key)
            if ratios is None:
                ratios = self._ratios[key] = deque(maxlen=self.settings.window)
            self._ratios.move_to_end(key)
            ratios.append(ratio)
            self._factors.pop(key, None)
            self._evict()

    def _evict(self) -> None:
        while len(self._ratios) > MAX_KEYS:
            evicted, _ = self._ratios.popitem(last=False)
            self._factors.pop(evicted, None)

    def replace(self, key: str, ratios: Iterable[float]) -> None:
        """Install the shared ratios of ``key`` (most recent last)."""
        kept = deque((r for r in ratios if isinstance(r, float) and math.isfinite(r) and r > 0),
                     maxlen=self.settings.window)
        with self._lock:
            if self._ratios.get(key) == kept:
                return  # unchanged: keep the computed factor
            self._ratios[key] = kept
            self._ratios.move_to_end(key)
            self._factors.pop(key, None)
            self._evict()

    def samples(self, key: str) -> list[float]:
        with self._lock:
            return list(self._ratios.get(key, ()))

    def factor(self, key: str) -> float | None:
        with self._lock:  # a sort of at most ``window`` floats, once per change of the key's ratios
            if key in self._factors:
                return self._factors[key]
            ratios = self._ratios.get(key)
            if ratios is None:
                return None
            factor = None
            if len(ratios) >= self.settings.min_samples:
                value = math.ceil(quantile(list(ratios), self.settings.quantile) * 1000) / 1000  # never below
                factor = min(self.settings.max_factor, max(self.settings.min_factor, value))
            self._factors[key] = factor
            return factor

    def correction(self, keys: Iterable[str]) -> Correction | None:
        """The largest learned correction over ``keys``; None when none has enough samples."""
        best: Correction | None = None
        for key in keys:
            factor = self.factor(key)
            if factor is not None and (best is None or factor > best.factor):
                with self._lock:
                    samples = len(self._ratios.get(key, ()))
                best = Correction(factor, samples, key)
        return best


@dataclass(frozen=True)
class LearnedWindow:
    window: int
    key: str
    source: str

    def describe(self) -> str:
        return f"{self.window} learned from a provider error of deployment {self.key} ({self.source})"


class LearnedWindows:
    def __init__(self, settings: LearningSettings | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or LearningSettings()
        self._clock = clock
        self._windows: OrderedDict[str, tuple[int, float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def learn(self, key: str, window: int, source: str, *, at: float | None = None) -> bool:
        """Keep ``window`` for ``key`` if it is smaller than what is known; True when it changed."""
        if not isinstance(window, int) or window <= 0:
            return False
        now = self._clock() if at is None else at
        with self._lock:
            known = self._live(key, now)
            if known is not None and known[0] <= window:
                return False
            self._windows[key] = (window, now, source)
            self._windows.move_to_end(key)
            while len(self._windows) > MAX_KEYS:
                self._windows.popitem(last=False)
            return True

    def _live(self, key: str, now: float) -> tuple[int, float, str] | None:
        known = self._windows.get(key)
        if known is not None and now - known[1] > self.settings.window_ttl_seconds:
            del self._windows[key]
            return None
        return known

    def get(self, key: str) -> tuple[int, float, str] | None:
        with self._lock:
            return self._live(key, self._clock())

    def window(self, keys: Iterable[str]) -> LearnedWindow | None:
        best: LearnedWindow | None = None
        for key in keys:
            known = self.get(key)
            if known is not None and (best is None or known[0] < best.window):
                best = LearnedWindow(known[0], key, known[2])
        return best
