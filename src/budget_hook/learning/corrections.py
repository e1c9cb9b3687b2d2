"""What the providers taught us: a per-deployment count correction and learned windows (pure; no I/O).

Contract:

* ``CorrectionBook.add(key, estimate, billed, teacher)`` keeps the ratio billed / estimate of one response
  of the deployment ``key``, with the caller whose request taught it (``teacher``: a hash of its key).
  Each teacher keeps its own most recent ``window`` ratios (``MAX_TEACHERS`` teachers per key, the
  least recent forgotten): one teacher's flood never evicts another's. Small requests, whose framing
  dominates, and ratios no count of ours could be off by, are not kept. ``correction(keys, teacher)`` is
  the largest correction over ``keys`` (the deployments a request may go to). Per key: each teacher with
  ``min_samples`` ratios of its own has its factor (the ``quantile`` of its ratios), the teachers with
  fewer share one; the *consensus* is the median of those factors when there are three or more, else
  the larger; a request gets the larger of its own teacher's factor and the consensus, clamped to
  ``[min_factor, max_factor]``. So what one key's traffic teaches applies to that key; it reaches
  everyone else only when most teachers agree, and one teacher can never lower what another taught.
* ``LearnedWindows.learn(key, window)`` keeps the smallest window a provider's overflow error named for
  ``key``, for ``ttl`` seconds; ``window(keys)`` is the smallest over ``keys``. ``ServedFloor`` keeps the
  largest prompt each deployment was billed for on a success: a window below it is impossible, so it is
  neither learned nor used.

All are thread-safe and bounded (``MAX_KEYS`` keys). ``replace`` installs what another instance shared
(see ``budget_hook.proxy.shared``): the shared state is the truth, the local one a cache of it.

Why the factor never goes below 1.0 by default: every client's responses feed the same window, so a
client that sent text the estimate over-counts (or a flood of it) could otherwise lower everyone's counts
below what the provider bills, and the window guarantee would go. Raising is bounded by ``max_factor``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..knobs import knob

#: deployments remembered at most (keys come from the router's deployment ids)
MAX_KEYS = 4096


@dataclass(frozen=True)
class LearningSettings:
    """How corrections are learned (``callback_settings.budget_hook.learning``). Each setting is a ``knob``:
    the YAML edge (``policy.settings``) takes its type, default, bounds and doc from here."""

    enabled: bool = knob(True, doc="learn corrections and windows from providers' answers")
    window: int = knob(200, ge=1, le=100_000, doc="ratios kept per deployment (the most recent)")
    quantile: float = knob(0.95, gt=0, le=1, doc="which quantile of billed/estimate is applied (a high one: "
                                                 "under-counting is what breaks the window)")
    min_samples: int = knob(20, ge=1, le=100_000, doc="ratios needed before a deployment's correction is applied")
    min_factor: float = knob(1.0, gt=0, le=10, doc="the smallest correction factor applied")
    max_factor: float = knob(1.5, gt=0, le=10, doc="the largest correction factor applied")
    min_billed_tokens: int = knob(100, ge=0, doc="responses billed fewer input tokens than this are not learned "
                                                 "from")
    window_ttl_seconds: float = knob(24 * 3600.0, gt=0, doc="how long a window learned from an overflow error "
                                                            "is kept")
    min_window_tokens: int = knob(1024, ge=1, doc="a window learned from an error is never below this many tokens")
    min_window_ratio: float = knob(0.125, ge=0, le=1, doc="nor below this share of the deployment's configured "
                                                          "window (whatever an error says)")
    max_sample_ratio: float = knob(3.0, gt=1, le=100, doc="a ratio billed / estimate outside [1 / this, this] is "
                                                          "not about the request we sent: not kept")
    share: Literal["auto", "off"] = knob("auto", doc="share through LiteLLM's Redis when it has one (auto), or keep "
                                                     "it per process (off)")
    sync_seconds: float = knob(1.0, ge=0, le=3600, doc="how often a proxy re-reads the shared state of a "
                                                       "deployment (seconds)")
    redis_timeout_seconds: float = knob(0.2, gt=0, le=10, doc="how long a proxy waits for Redis (seconds)")


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


@functools.lru_cache(maxsize=1024)  # asked twice a request (the lookup, the record) of the gateway's few keys
def teacher_of(key_hash: str | None, team_id: str | None) -> str:
    """Who taught a sample: a short hash of the caller's key (LiteLLM's hashed token), else of its team."""
    for kind, value in (("key", key_hash), ("team", team_id)):
        if isinstance(value, str) and value:
            return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()[:16]}"
    return ANONYMOUS


#: per deployment, the teachers remembered, and each one's ratios (the most recent); when another arrives, one leaves
#: (``CorrectionBook.leaving``)
MAX_TEACHERS = 16
#: a teacher with a factor of its own that taught nothing for this long may leave for a newcomer
IDLE_TEACHER_SECONDS = 24 * 3600


class CorrectionBook:
    def __init__(self, settings: LearningSettings | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings or LearningSettings()
        self.clock = clock
        #: deployment -> teacher -> its most recent ratios: one teacher's flood never evicts another's
        self._ratios: OrderedDict[str, OrderedDict[str, deque[float]]] = OrderedDict()
        #: deployment -> teacher -> when it last taught (``clock``)
        self._taught: dict[str, dict[str, float]] = {}
        #: per key, computed once per change of its ratios (asked on every request): each qualified
        #: teacher's factor, and the consensus
        self._factors: dict[str, tuple[dict[str, float], float | None]] = {}
        self._lock = threading.Lock()

    @property
    def per_teacher(self) -> int:
        """Ratios kept per teacher and deployment: the most recent ``window``."""
        return self.settings.window

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
            teachers = self._ratios.get(key)
            if teachers is None:
                teachers = self._ratios[key] = OrderedDict()
            self._ratios.move_to_end(key)
            ratios = teachers.get(teacher)
            if ratios is None:
                ratios = teachers[teacher] = deque(maxlen=self.per_teacher)
            teachers.move_to_end(teacher)
            ratios.append(ratio)
            taught = self._taught.setdefault(key, {})
            taught[teacher] = self.clock()
            while len(teachers) > MAX_TEACHERS:
                leaving = self.leaving(teachers, taught, teacher)
                del teachers[leaving]
                taught.pop(leaving, None)
            self._factors.pop(key, None)
            self._evict()

    def leaving(self, teachers: Mapping[str, deque[float]], taught: Mapping[str, float], newcomer: str) -> str:
        """Who leaves a deployment's full book when ``newcomer`` taught: the least recent teacher with fewer than
        ``min_samples`` ratios (no factor of its own), else the least recent idle one (``IDLE_TEACHER_SECONDS``), else
        the newcomer, who gets the consensus. Keys that taught a ratio or two never push out an active teacher's
        factor (an attack review: sixteen keys took a tenant's 1.30 to 1.0), and a book of teachers long gone makes
        room (``shared._PUSH_RATIO`` is the same rule for Redis)."""
        others = [t for t in teachers if t != newcomer]  # least recent first
        young = next((t for t in others if len(teachers[t]) < self.settings.min_samples), None)
        idle = self.clock() - IDLE_TEACHER_SECONDS
        return young or next((t for t in others if taught.get(t, 0.0) < idle), newcomer)

    def _evict(self) -> None:
        while len(self._ratios) > MAX_KEYS:
            evicted, _ = self._ratios.popitem(last=False)
            self._factors.pop(evicted, None)
            self._taught.pop(evicted, None)

    def replace(self, key: str, by_teacher: Mapping[str, Iterable[float]]) -> None:
        """Install the shared ratios of ``key``: each teacher's, most recent last."""
        kept: OrderedDict[str, deque[float]] = OrderedDict()
        for teacher, ratios in list(by_teacher.items())[-MAX_TEACHERS:]:
            values = deque((r for r in ratios if isinstance(r, float) and math.isfinite(r) and r > 0),
                           maxlen=self.per_teacher)
            if values:
                kept[teacher] = values
        with self._lock:
            if self._ratios.get(key) == kept:
                return  # unchanged: keep the computed factors
            self._ratios[key] = kept
            known, now = self._taught.get(key, {}), self.clock()  # Redis's script decides who leaves there
            self._taught[key] = {teacher: known.get(teacher, now) for teacher in kept}
            self._ratios.move_to_end(key)
            self._factors.pop(key, None)
            self._evict()

    def samples(self, key: str) -> list[float]:
        with self._lock:
            return [r for ratios in self._ratios.get(key, {}).values() for r in ratios]

    def teachers(self, key: str) -> dict[str, int]:
        """How many of ``key``'s ratios each teacher taught."""
        with self._lock:
            return {teacher: len(ratios) for teacher, ratios in self._ratios.get(key, {}).items()}

    def _quantile_factor(self, ratios: list[float]) -> float:
        value = math.ceil(quantile(ratios, self.settings.quantile) * 1000) / 1000  # never below
        return min(self.settings.max_factor, max(self.settings.min_factor, value))

    def _computed(self, key: str) -> tuple[dict[str, float], float | None]:
        """Each qualified teacher's factor, and the consensus, computed once per change. Teachers with fewer
        than ``min_samples`` ratios share one pool. With three or more factors the consensus is their median
        (the higher of the middle two): no single teacher moves it past what the others taught, up or down.
        With one or two it is the larger: one teacher can raise it (to ``max_factor`` at most), never lower
        it below what another taught."""
        if key in self._factors:
            return self._factors[key]
        minimum = self.settings.min_samples
        teachers: Mapping[str, deque[float]] = self._ratios.get(key, {})
        own = {t: self._quantile_factor(list(r)) for t, r in teachers.items() if len(r) >= minimum and t != ANONYMOUS}
        pooled = [r for t, rs in teachers.items() if t not in own for r in rs]
        factors = sorted([*own.values(), *([self._quantile_factor(pooled)] if len(pooled) >= minimum else [])])
        consensus = (factors[len(factors) // 2] if len(factors) >= 3 else factors[-1]) if factors else None
        self._factors[key] = (own, consensus)
        return own, consensus

    def factor(self, key: str, teacher: str | None = None) -> float | None:
        """The factor a request of ``teacher`` gets for ``key``: the larger of its own and the consensus."""
        with self._lock:
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
                best = Correction(factor, len(self.samples(key)), key)
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
                self._served[key] = (known[0], now)  # still served: the floor stays while the traffic lasts
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
