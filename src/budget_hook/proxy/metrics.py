"""Counters of what the plugin decided, in Prometheus' text format (pure; no prometheus_client needed).

Contract: ``Metrics.observe(record, outcome, billed)`` counts one settled request: its decision by action,
model group and team, its tokens before and after, and, when the provider reported its bill, the bill next
to our estimate of what was forwarded. ``render()`` is the text ``GET /budget_hook/metrics`` answers
(``text/plain; version=0.0.4``). ``register_with_prometheus(metrics)`` also serves the same series through
``prometheus_client``'s default registry when that package is installed, which is what LiteLLM's own
Prometheus integration (``callbacks: ["prometheus"]``) exposes on the proxy's ``/metrics``; returns whether it
registered. Thread-safe. Labels come from the operator's configuration only: ``model_group`` is the record's
``metrics_group`` (``proxy.labels``: a configured group, the wildcard pattern a name matched, ``unconfigured``
for any other name, ``multiple`` for a list), ``team`` the team's alias or id from LiteLLM's database; so
made-up model names all count under ``unconfigured`` and can never push a real group out. The label sets
are bounded besides (``MAX_SERIES``: what does not fit is counted with every label but ``action`` and
``outcome`` set to ``other``). ``Metrics(held=...)`` adds gauges of what the plugin keeps per call right now
(``records.RecordStore.held``), read when the metrics are.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..pipeline.record import tokens_left

MAX_SERIES = 2000
_NAMES = {
    "decisions": ("budget_hook_decisions_total", "counter",
                  "Requests decided, by action, outcome, model group and team"),
    "before": ("budget_hook_tokens_before_total", "counter", "Input tokens as the clients sent them"),
    "after": ("budget_hook_tokens_after_total", "counter",
              "Input tokens the decisions left for the provider: what trimming left, 0 for a block "
              "(pipeline.record.tokens_left, the definition replay uses; before - after is what was saved)"),
    "estimate": ("budget_hook_estimated_prompt_tokens_total", "counter",
                 "Our estimate of what was forwarded, on requests whose bill the provider reported"),
    "billed": ("budget_hook_provider_prompt_tokens_total", "counter",
               "What the provider billed for the same requests"),
    "learned_factor": ("budget_hook_learned_factor", "gauge",
                       "The correction learned from a deployment's bills that the latest request to it was estimated "
                       "with (1 = none; bounded by learning.min_factor and learning.max_factor)"),
    "learned_samples": ("budget_hook_learned_samples", "gauge",
                        "How many of the deployment's bills that correction was learned from"),
    "in_flight": ("budget_hook_calls_in_flight", "gauge",
                  "Decided calls whose outcome LiteLLM has not logged yet (failed ones stay a few seconds)"),
    "held_calls": ("budget_hook_calls_holding_request", "gauge",
                   "Calls that keep part of their request for their attempts and errors"),
    "held_bytes": ("budget_hook_request_bytes_held", "gauge",
                   "About how many bytes of requests those calls keep (bounded by records.HELD_BYTES)"),
}
#: series that are not counted but read from the plugin's state when the metrics are (``Metrics(held=...)``)
_LIVE = ("in_flight", "held_calls", "held_bytes")
#: the labels a series keeps once its name is at ``MAX_SERIES``
_KEPT_LABELS = frozenset({"action", "outcome"})


def _label(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\n", " ")[:200]


def _number(value: float) -> str:
    """A sample's value, exactly: a counter past a million tokens keeps every digit (``%g`` kept six)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class Metrics:
    def __init__(self, held: Callable[[], tuple[int, int, int]] | None = None) -> None:
        #: the plugin's calls in flight, the calls holding part of their request and the bytes they hold
        self._held = held
        self._lock = threading.Lock()
        self._values: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))

    def _key(self, name: str, labels: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        return self._bounded(name, tuple(sorted((k, _label(v)) for k, v in labels.items())))

    def _bounded(self, name: str, key: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """``key``, or, once the series is at its bound, ``key`` with every label but ``action`` and ``outcome`` set
        to ``other`` (a new team as much as a new group: either would add a series)."""
        if key not in self._values[name] and len(self._values[name]) >= MAX_SERIES:
            key = tuple((k, v if k in _KEPT_LABELS else "other") for k, v in key)
        return key

    def observe(self, record: Any, outcome: str, billed: int | None = None) -> None:
        # the adapter's label (a configured group, a wildcard pattern, ``unconfigured``): never a client's name
        group = getattr(record, "metrics_group", None) or record.model_group
        labels = {"model_group": group, "team": record.team_alias or record.team_id or ""}
        with self._lock:
            self._values["decisions"][self._key("decisions", {**labels, "action": record.action,
                                                              "outcome": outcome})] += 1
            # the token series share their labels: the key is made once, and checked against each series' bound
            key = tuple(sorted((k, _label(v)) for k, v in labels.items()))
            if isinstance(record.tokens_before, int):
                self._values["before"][self._bounded("before", key)] += record.tokens_before
            if isinstance(record.tokens_before, int) or isinstance(record.tokens_after, int):
                self._values["after"][self._bounded("after", key)] += tokens_left(record.action, record.tokens_before,
                                                                                  record.tokens_after)
            if isinstance(billed, int) and isinstance(record.estimate_forwarded, int):
                self._values["estimate"][self._bounded("estimate", key)] += record.estimate_forwarded
                self._values["billed"][self._bounded("billed", key)] += billed

        self._learned(record, group)

    def _learned(self, record: Any, group: Any) -> None:
        """The learned correction this request was estimated with, per deployment (a gauge: the latest)."""
        count = getattr(record, "count", None)
        learned = count.get("learned") if isinstance(count, dict) else None
        if not isinstance(learned, dict):
            return
        deployment, factor = learned.get("deployment"), learned.get("factor")
        if not isinstance(deployment, str) or not isinstance(factor, (int, float)):
            return
        labels = {"model_group": group, "deployment": deployment}
        with self._lock:
            self._values["learned_factor"][self._key("learned_factor", labels)] = float(factor)
            samples = learned.get("samples")
            if isinstance(samples, int):
                self._values["learned_samples"][self._key("learned_samples", labels)] = samples

    def families(self) -> list[tuple[str, str, list[tuple[dict[str, str], float]]]]:
        """Each metric's name, help and samples (labels, value), as one consistent snapshot."""
        live = dict(zip(_LIVE, self._held(), strict=True)) if self._held is not None else {}
        with self._lock:
            return [(metric, doc, [({}, float(live[name]))] if name in _LIVE else
                     [(dict(key), value) for key, value in sorted(self._values[name].items())])
                    for name, (metric, _, doc) in _NAMES.items() if name in live or name not in _LIVE]

    def kind(self, metric: str) -> str:
        return next((kind for name, kind, _ in _NAMES.values() if name == metric), "counter")

    def render(self) -> str:
        lines: list[str] = []
        for metric, doc, samples in self.families():
            lines += [f"# HELP {metric} {doc}", f"# TYPE {metric} {self.kind(metric)}"]
            for labels, value in samples:
                text = ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items())
                lines.append(f"{metric}{{{text}}} {_number(value)}" if text else f"{metric} {_number(value)}")
        return "\n".join(lines) + "\n"


_REGISTERED: list[Metrics] = []


def register_with_prometheus(metrics: Metrics) -> bool:
    """Serve ``metrics`` from prometheus_client's default registry (once per process: a later plugin instance
    takes the place of an earlier one)."""
    try:
        from prometheus_client import REGISTRY
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        return False
    if _REGISTERED:
        _REGISTERED[0] = metrics
        return True

    class Collector:
        def collect(self) -> Any:
            for metric, doc, samples in _REGISTERED[0].families():
                names = sorted({k for labels, _ in samples for k in labels})
                kind = GaugeMetricFamily if _REGISTERED[0].kind(metric) == "gauge" else CounterMetricFamily
                family = kind(metric, doc, labels=names)
                for labels, value in samples:
                    family.add_metric([labels.get(k, "") for k in names], value)
                yield family

    _REGISTERED.append(metrics)
    REGISTRY.register(Collector())
    return True
