"""What the providers taught us: a per-deployment count correction and learned windows (pure; no I/O).

Contract:

* ``CorrectionBook.add(key, estimate, billed, teacher)`` keeps the ratio billed / estimate of one response
  of the deployment ``key``, with the caller whose request taught it (``teacher``: a hash of its key; a
  bounded window of the most recent ``window`` ratios; small requests, whose framing dominates, and
  ratios no count of ours could be off by, are not kept). ``correction(keys, teacher)`` is the largest
  correction over ``keys`` (the deployments a request may go to). Per key: each teacher with
  ``min_samples`` ratios of its own has its factor (the ``quantile`` of its ratios), the teachers with
  fewer share one; the *consensus* is the lower median of those factors, and a request gets the larger
  of its own teacher's factor and the consensus, clamped to ``[min_factor, max_factor]``. So what one
  key's traffic teaches applies to that key, and reaches everyone else only when most teachers agree.
* ``LearnedWindows.learn(key, window)`` keeps the smallest window a provider's overflow error named for
  ``key``, for ``ttl`` seconds; ``window(keys)`` is the smallest over ``keys``. ``ServedFloor`` keeps the
  largest prompt each deployment was billed for on a success: a window below it is impossible, so it is
  neither learned nor used.

Both are thread-safe and bounded (``MAX_KEYS`` keys). ``replace`` installs what another instance shared
(see ``budget_hook.proxy.shared``): the shared list is the truth, the local one a cache of it.

Why the factor never goes below 1.0 by default: every client's responses feed the same window, so a
client that sent text the estimate over-counts (or a flood of it) could otherwise lower everyone's counts
below what the provider bills, and the window guarantee would go. Raising is bounded by ``max_factor``.
"""

from __future__ import annotations

import hashlib
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
    #: a window learned from an error is never below this many tokens, nor below this share of the
    #: deployment's configured window (whatever an error says)
    min_window_tokens: int = 1024
    min_window_ratio: float = 0.125
    #: a ratio billed / estimate outside [1 / this, this] is not about the request we sent: not kept
    max_sample_ratio: float = 3.0
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


#: the teacher of ratios whose caller is unknown (and of ratios shared by an older version)
ANONYMOUS = "*"


def teacher_of(key_hash: str | None, team_id: str | None) -> str:
    """Who taught a sample: a short hash of the caller's key (LiteLLM's hashed token), else of its team."""
    for kind, value in (("key", key_hash), ("team", team_id)):
        if isinstance(value, str) and value:
            return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()[:16]}"
    return ANONYMOUS


class CorrectionBook:
    def __init__(self, settings: LearningSettings | None = None) -> None:
        self.settings = settings or LearningSettings()
        self._ratios: OrderedDict[str, deque[tuple[float, str]]] = OrderedDict()
        #: per key, computed once per change of its ratios (asked on every request): each qualified
        #: teacher's factor, and the consensus
        self._factors: dict[str, tuple[dict[str, float], float | None]] = {}
        self._lock = threading.Lock()

    def ratio(self, estimate: int, billed: int) -> float | None:
        """The ratio one response teaches, or None when it teaches nothing (too small, nonsense)."""
        if not (isinstance(estimate, int) and isinstance(billed, int)) or estimate <= 0:
            return None
        if billed < self.settings.min_billed_tokens:
            return None
        ratio = round(billed / estimate, 4)
        limit = self.settings.max_sample_ratio
        return ratio if 1 / limit <= ratio <= limit else None

    def add(self, key: str, estimate: int, billed: int, teacher: str = ANONYMOUS) -> float | None:
        ratio = self.ratio(estimate, billed)
        if ratio is not None:
            self.add_ratio(key, ratio, teacher)
        return ratio

    def add_ratio(self, key: str, ratio: float, teacher: str = ANONYMOUS) -> None:
        with self._lock:
            ratios = self._ratios.get(key)
            if ratios is None:
                ratios = self._ratios[key] = deque(maxlen=self.settings.window)
            self._ratios.move_to_end(key)
            ratios.append((ratio, teacher))
            self._factors.pop(key, None)
            self._evict()

    def _evict(self) -> None:
        while len(self._ratios) > MAX_KEYS:
            evicted, _ = self._ratios.popitem(last=False)
            self._factors.pop(evicted, None)

    def replace(self, key: str, entries: Iterable[tuple[float, str]]) -> None:
        """Install the shared ratios of ``key`` with their teachers (most recent last)."""
        kept = deque(((r, t) for r, t in entries if isinstance(r, float) and math.isfinite(r) and r > 0),
                     maxlen=self.settings.window)
        with self._lock:
            if self._ratios.get(key) == kept:
                return  # unchanged: keep the computed factors
            self._ratios[key] = kept
            self._ratios.move_to_end(key)
            self._factors.pop(key, None)
            self._evict()

    def samples(self, key: str) -> list[float]:
        with self._lock:
            return [ratio for ratio, _ in self._ratios.get(key, ())]

    def teachers(self, key: str) -> dict[str, int]:
        """How many of ``key``'s ratios each teacher taught."""
        with self._lock:
            counts: dict[str, int] = {}
            for _, teacher in self._ratios.get(key, ()):
                counts[teacher] = counts.get(teacher, 0) + 1
            return counts

    def _quantile_factor(self, ratios: list[float]) -> float:
        value = math.ceil(quantile(ratios, self.settings.quantile) * 1000) / 1000  # never below
        return min(self.settings.max_factor, max(self.settings.min_factor, value))

    def _computed(self, key: str) -> tuple[dict[str, float], float | None]:
        """Each qualified teacher's factor and the consensus (the lower median of the factors of the
        qualified teachers and of the pool of the others), computed once per change."""
        if key in self._factors:
            return self._factors[key]
        by_teacher: dict[str, list[float]] = {}
        for ratio, teacher in self._ratios.get(key, ()):
            by_teacher.setdefault(teacher, []).append(ratio)
        minimum = self.settings.min_samples
        own = {t: self._quantile_factor(r) for t, r in by_teacher.items() if len(r) >= minimum and t != ANONYMOUS}
        pooled = [r for t, rs in by_teacher.items() if t not in own for r in rs]
        factors = sorted([*own.values(), *([self._quantile_factor(pooled)] if len(pooled) >= minimum else [])])
        consensus = factors[(len(factors) - 1) // 2] if factors else None
        self._factors[key] = (own, consensus)
        return own, consensus

    def factor(self, key: str, teacher: str | None = None) -> float | None:
        """The factor a request of ``teacher`` gets for ``key``: the larger of its own and the consensus."""
        with self._lock:  # a sort of at most ``window`` floats, once per change of the key's ratios
            if key not in self._ratios:
                return None
            own, consensus = self._computed(key)
        mine = own.get(teacher) if teacher is not None else None
        candidates = [f for f in (mine, consensus) if f is not None]
        return max(candidates) if candidates else None

    def correction(self, keys: Iterable[str], teacher: str | None = None) -> Correction | None:
        """The largest learned correction over ``keys`` for a request of ``teacher``; None when none has
        enough samples."""
        best: Correction | None = None
        for key in keys:
            factor = self.factor(key, teacher)
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


class ServedFloor:
    """The largest prompt each deployment was billed for on a success, for ``ttl`` seconds: proof that
    its window is at least that large (a success is the provider's own answer; no client can write it,
    only make it larger by sending more, which makes learning a window more cautious, never less)."""

    def __init__(self, settings: LearningSettings | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or LearningSettings()
        self._clock = clock
        self._served: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def serve(self, key: str, tokens: int) -> bool:
        """Note that ``key`` served a prompt of ``tokens``; True when that raised its floor."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            return False
        now = self._clock()
        with self._lock:
            known = self._served.get(key)
            if known is not None and now - known[1] <= self.settings.window_ttl_seconds and known[0] >= tokens:
                return False
            self._served[key] = (tokens, now)
            self._served.move_to_end(key)
            while len(self._served) > MAX_KEYS:
                self._served.popitem(last=False)
            return True

    def floor(self, key: str) -> int:
        with self._lock:
            known = self._served.get(key)
            if known is None or self._clock() - known[1] > self.settings.window_ttl_seconds:
                return 0
            return known[0]


def window_floor(settings: LearningSettings, served: int, configured: int | None) -> int:
    """The smallest window an error may teach for a deployment: what it served, the absolute minimum, and
    ``min_window_ratio`` of its configured window."""
    share = math.ceil(configured * settings.min_window_ratio) if configured else 0
    return max(settings.min_window_tokens, served, share)
