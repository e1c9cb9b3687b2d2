"""Refit the counting profiles' main terms on any subset of the calibration set, by one fixed rule.

The shipped values live in ``budget_hook.counting.profiles`` (data, per family and generation). This module
re-derives the main ones from billed usage with a rule anyone can rerun, so ``bench/accuracy.py`` can show
(a) what the rule gives on the ``fit`` half next to the shipped values, and (b) a genuine
leave-one-repository-out: the terms refitted without a repository, then that repository counted with them.

The rule, per term (a profile field, optionally for one model generation):

* the term is fitted on the requests where it is identifiable (its *subset*: text-only requests for a text
  factor, requests with tools but no media for a tool prompt, ...; 100 billed tokens or more);
* its value is the smallest on its grid for which at most 1% of the subset (rounded to the nearest whole
  request) is counted below 1.02x its bill (``NOISE``: a provider's own figure for one body differs by a
  few percent between recordings, so a term fitted to the edge under-counts the next recording); two terms fitted together (OpenAI's per-request and per-function tool
  overheads) take the feasible pair with the lowest median over-count;
* Claude's text factor is one term for the known generations (a generation has few text-only requests;
  the shipped table has one value too); the newest keep their heavier shipped offset;
* a generation with no request in the subset takes the most conservative (largest) value fitted for the
  family's other generations: a new or unseen generation never gets lighter terms than a known one.

Estimates are linear in every additive term, so each request is counted once per term at the shipped value
and once one step above it; the fit works on those slopes, and the reports count the requests again,
exactly, with the refitted profiles.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from itertools import product
from typing import Any

from budget_hook.counting import TokenCounter
from budget_hook.counting.profiles import resolve_tokenizer
from budget_hook.shapes import SHAPES

MIN_BILLED = 100
UNDER_ALLOWED = 0.01
#: a provider's own figure for one body differs by a few percent between recordings: a fitted term must
#: cover its requests with that much to spare
NOISE = 0.02
MEDIA = {"images", "documents", "audio"}


def _text_only(kinds: list[str]) -> bool:
    return kinds == ["text only"]


def _tools(kinds: list[str]) -> bool:
    return "tools" in kinds and not MEDIA & set(kinds)


def _schemas(kinds: list[str]) -> bool:
    return "schemas" in kinds and not MEDIA & set(kinds)


def _thinking(kinds: list[str]) -> bool:
    return "thinking" in kinds and not MEDIA & set(kinds)


@dataclass(frozen=True)
class Term:
    """One fitted profile field: ``generation`` None for every generation of the family."""

    field: str
    subset: Callable[[list[str]], bool]
    grid: tuple[float, ...]
    generation: str | None = None

    @property
    def name(self) -> str:
        return f"{self.field}[{self.generation}]" if self.generation else self.field


def _grid(start: float, stop: float, step: float) -> tuple[float, ...]:
    count = round((stop - start) / step)
    return tuple(round(start + i * step, 4) for i in range(count + 1))


FACTORS = _grid(1.0, 1.5, 0.01)
CLAUDE_GENERATIONS = ("claude-3", "claude-4.0", "claude-4.5", "claude-4.6")
#: per provider: groups of terms fitted together, in order (a later group sees the earlier ones' values)
TERMS: dict[str, tuple[tuple[Term, ...], ...]] = {
    "anthropic": (
        # one text factor for the known generations (text-only requests are few per generation; the shipped
        # table is one value too), the newest keeping its heavier shipped offset
        (Term("safety_factor", _text_only, FACTORS),),
        *((Term("tools_request_overhead", _tools, _grid(0, 1200, 10), g),) for g in CLAUDE_GENERATIONS),
        (Term("structured_output_overhead", _schemas, _grid(0, 600, 10)),),
        (Term("thinking_overhead", _thinking, _grid(0, 400, 10)),),
    ),
    "gemini": (
        (Term("safety_factor", _text_only, FACTORS),),
        (Term("tools_request_overhead", _tools, _grid(0, 200, 2)),),
    ),
    "openai_chat": (
        (Term("tools_request_overhead", _tools, _grid(0, 80, 2)), Term("tokens_per_function", _tools, _grid(0, 40, 1))),
    ),
    "openai_responses": (
        (Term("responses_tools_overhead", _tools, _grid(0, 80, 2)),
         Term("responses_tokens_per_function", _tools, _grid(0, 40, 1))),
    ),
}
#: the step a slope is measured over
STEPS = {"safety_factor": 0.1}


def base_profile(row: dict) -> Any:
    return resolve_tokenizer(row["counting_model"])


def count_with(row: dict, overrides: dict[str, float]) -> int:
    """The request counted with the shipped profile moved by ``overrides`` (field -> value for this row)."""
    profile = base_profile(row)
    if overrides:
        profile = replace(profile, **{f: type(getattr(profile, f))(v) for f, v in overrides.items()})
    counter = TokenCounter(profile, model=row["counting_model"])
    return int(SHAPES.get(row["shape"]).count(row["request"], counter))


def _applies(term: Term, row: dict) -> bool:
    generation = base_profile(row).generation
    return term.generation is None or generation.split(" ")[0] == term.generation


def shipped_value(term: Term, rows: Iterable[dict]) -> float:
    """The term's shipped value: the most common among the rows it applies to (gpt-5's tool preamble is on
    top of OpenAI's per-request overhead; a fitted value moves every row's field by the same delta)."""
    seen = [float(getattr(base_profile(row), term.field)) for row in rows if _applies(term, row)]
    return statistics.mode(seen) if seen else float("nan")


def slopes(rows: list[dict], terms: Iterable[Term]) -> None:
    """Store, per row, the estimate's slope in each term (0 where the term does not apply)."""
    for row in rows:
        row.setdefault("slope", {})
        for term in terms:
            if term.name in row["slope"]:
                continue
            if not _applies(term, row):
                row["slope"][term.name] = 0.0
                continue
            step = STEPS.get(term.field, 1)
            value = getattr(base_profile(row), term.field)
            row["slope"][term.name] = (count_with(row, {term.field: value + step}) - row["estimate"]) / step


def linear_estimate(row: dict, values: dict[str, float], shipped: dict[str, float]) -> float:
    return row["estimate"] + sum(row["slope"].get(name, 0.0) * (value - shipped[name])
                                 for name, value in values.items() if not math.isnan(shipped[name]))


def _feasible(subset: list[dict], values: dict[str, float], shipped: dict[str, float]) -> tuple[bool, float]:
    ratios = [linear_estimate(r, values, shipped) / r["billed"] for r in subset]
    under = sum(1 for x in ratios if x < 1 + NOISE)
    return under <= round(UNDER_ALLOWED * len(subset)), statistics.median(ratios)


def fit(rows: list[dict], provider: str) -> tuple[dict[str, float], dict[str, float]]:
    """The terms' values fitted on ``rows`` (one provider's), by the rule above, and their shipped values."""
    groups = TERMS[provider]
    terms = [t for group in groups for t in group]
    slopes(rows, terms)
    shipped = {t.name: shipped_value(t, rows) for t in terms}
    # a generation absent from ``rows`` entirely: its shipped value, then raised to its neighbours' largest
    values = {t.name: (shipped[t.name] if not math.isnan(shipped[t.name]) else t.grid[-1]) for t in terms}
    unfitted: list[Term] = []
    for _ in range(2):  # two passes: a group fitted early sees the later groups' values the second time
        unfitted = []
        for group in groups:
            subset = [r for r in rows if r["billed"] >= MIN_BILLED and group[0].subset(r["kinds"])
                      and all(_applies(t, r) for t in group)]
            if not subset:
                unfitted.extend(group)
                continue
            best: tuple[float, float, tuple[float, ...]] | None = None
            for combo in product(*(t.grid for t in group)):
                trial = {**values, **{t.name: v for t, v in zip(group, combo, strict=True)}}
                ok, median = _feasible(subset, trial, shipped)
                if ok and (best is None or (median, sum(combo)) < best[:2]):
                    best = (median, sum(combo), combo)
                    if len(group) == 1:
                        break  # one term: the smallest feasible value
            chosen = best[2] if best else tuple(t.grid[-1] for t in group)
            values.update({t.name: v for t, v in zip(group, chosen, strict=True)})
    for term in unfitted:  # the most conservative neighbour
        fitted = [values[t.name] for t in terms if t.field == term.field and t not in unfitted]
        values[term.name] = max(fitted, default=values[term.name])
    return values, shipped


def overrides_for(row: dict, values: dict[str, float], shipped: dict[str, float], provider: str) -> dict[str, float]:
    """Field -> value for one row's profile: the shipped value moved by the fitted delta."""
    profile = base_profile(row)
    out: dict[str, float] = {}
    for group in TERMS[provider]:
        for term in group:
            if _applies(term, row):
                if math.isnan(shipped[term.name]):  # unseen in training: its neighbours' largest value
                    out[term.field] = values[term.name]
                else:
                    out[term.field] = getattr(profile, term.field) + values[term.name] - shipped[term.name]
    # a generation outside the fitted list (claude-5+): the largest fitted value of each per-generation field
    if provider == "anthropic" and profile.generation not in CLAUDE_GENERATIONS:
        out["tools_request_overhead"] = max(v for name, v in values.items()
                                            if name.startswith("tools_request_overhead["))
    return out


def refit_and_count(train: list[dict], test: list[dict], provider: str) -> tuple[dict[str, float], list[dict]]:
    """Fit on ``train``, count ``test`` exactly with the fitted profiles: rows with a new ``estimate``."""
    values, shipped = fit(train, provider)
    counted = [{**row, "estimate": count_with(row, overrides_for(row, values, shipped, provider))} for row in test]
    return values, counted
