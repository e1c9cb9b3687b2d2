"""A counter whose counts are multiplied by a calibration factor (a learned correction, or the provider's
own count of this very request against our estimate of it).

Contract: ``corrected(counter, factor, label)`` returns ``counter`` itself when ``factor`` is 1, else a
``TokenCounter`` that counts like ``counter`` and multiplies every message, the tools and the overheads
by ``factor`` (rounding each up), so a trimmer working on it sees corrected numbers throughout. Its
``method`` and every ``RequestCount.method`` say the factor (``o200k_base x1.20, learned x1.080
...``). ``with_overhead(counter, tokens)`` counts like ``counter`` plus ``tokens`` of request overhead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .counter import RequestCount, TokenCounter


class CorrectedCounter(TokenCounter):
    def __init__(self, base: TokenCounter, factor: float, label: str) -> None:
        # Share the base's (immutable) encoding and profile id: its cached per-message counts stay valid.
        self.__dict__.update(base.__dict__)
        self.base = base
        self.factor = factor
        self.label = label

    @property
    def method(self) -> str:
        return f"{self.base.profile.method}, {self.label}"

    def _scale(self, tokens: int) -> int:
        return math.ceil(tokens * self.factor) if tokens > 0 else tokens

    def count_message(self, message: Mapping[str, Any], *, index: int = 0, pad_system: bool = False) -> int:
        return self._scale(self.base.count_message(message, index=index, pad_system=pad_system))

    def count_key(self, message: Any) -> int | None:
        key = self.base.count_key(message)
        return None if key is None else hash((key, "corrected", self.factor))

    def renumbered(self, message: Mapping[str, Any], *, index: int = 0,
                   digits: int) -> Callable[[Mapping[str, Any], int], int] | None:
        base = self.base.renumbered(message, index=index, digits=digits)
        return None if base is None else lambda new_message, new_digits: self._scale(base(new_message, new_digits))

    def count_request(self, request: Mapping[str, Any]) -> RequestCount:
        count = self.base.count_request(request)
        return replace(count, method=self.method, per_message=tuple(self._scale(n) for n in count.per_message),
                       tools_tokens=self._scale(count.tools_tokens), overhead_tokens=self._scale(count.overhead_tokens))


def corrected(counter: TokenCounter, factor: float, label: str) -> TokenCounter:
    if factor == 1.0 or not math.isfinite(factor) or factor <= 0:
        return counter
    return CorrectedCounter(counter, factor, label)


class _WithOverhead(TokenCounter):
    def __init__(self, base: TokenCounter, tokens: int) -> None:
        self.__dict__.update(base.__dict__)
        self.base = base
        self.tokens = tokens

    @property
    def method(self) -> str:
        return self.base.method

    def count_message(self, message: Mapping[str, Any], *, index: int = 0, pad_system: bool = False) -> int:
        return self.base.count_message(message, index=index, pad_system=pad_system)

    def count_key(self, message: Any) -> int | None:
        return self.base.count_key(message)

    def renumbered(self, message: Mapping[str, Any], *, index: int = 0,
                   digits: int) -> Callable[[Mapping[str, Any], int], int] | None:
        return self.base.renumbered(message, index=index, digits=digits)

    def count_request(self, request: Mapping[str, Any]) -> RequestCount:
        count = self.base.count_request(request)
        return replace(count, overhead_tokens=count.overhead_tokens + self.tokens)


def with_overhead(counter: TokenCounter, tokens: int) -> TokenCounter:
    """A counter that counts like ``counter`` and adds ``tokens`` to every request's overhead: content the
    request pulls in by reference outside what is counted (a cached context, a stored prompt), at its flat
    estimate. Overhead is never trimmed, so the estimate stays in every count of the request."""
    return _WithOverhead(counter, tokens) if tokens > 0 else counter
