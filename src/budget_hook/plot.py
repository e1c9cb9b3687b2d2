"""``budget-hook replay --plot``: what the gateway did to each request, as an SVG picture (pure, stdlib).

Contract: ``svg(runs)`` takes ``{run name: replay rows}`` (``replay.replay``'s rows, the first run being the
current policy) and returns an SVG document: a title, a legend above the panels (one entry a line, so it
always fits), then one panel per model group (the ``max_groups`` busiest), each with its own axes: the
requests in the order they were replayed along x ("request #", ticks at round numbers), input tokens along y
("input tokens", ticks at round numbers, a faint grid). Grey: the tokens each request had; one coloured line
per run: the tokens it forwarded (a blocked request drops to 0 and is marked with a red cross); dashed, in the
run's colour: its input budget. A run that trims more sits lower; a cross is a request a client saw refused.
The picture is as tall as its panels and no taller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

WIDTH, PANEL_HEIGHT, LEFT, RIGHT = 900, 200, 80, 24
#: above each panel (its title) and below it (x ticks and the x axis label)
PANEL_TOP, PANEL_BOTTOM = 26, 46
TITLE, LEGEND_LINE = 30, 18
COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
GREY, RED = "#999999", "#d62728"
BLOCKED = ("blocked", "would_block")


def nice_ticks(peak: float, most: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``peak`` (1, 2 or 5 times a power of ten apart), at most ``most`` + 1."""
    peak = max(float(peak), 1.0)
    raw = peak / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = math.ceil(peak / step - 1e-9)
    return [step * i for i in range(count + 1)]


def _tokens(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:,.0f}"


def svg(runs: Mapping[str, Sequence[Mapping[str, Any]]], max_groups: int = 6) -> str:
    names = list(runs)
    first = runs[names[0]] if names else []
    counts: dict[str, int] = {}
    for row in first:
        if row.get("tokens_before") is not None:
            counts[row["model_group"]] = counts.get(row["model_group"], 0) + 1
    groups = sorted(counts, key=lambda g: -counts[g])[:max_groups]
    legend = [(GREY, "solid", "input tokens each request had")]
    for i, name in enumerate(names):
        colour = COLOURS[i % len(COLOURS)]
        legend += [(colour, "solid", f"input tokens forwarded: {name}"), (colour, "dashed", f"input budget: {name}")]
    legend.append((RED, "cross", "request refused (blocked: 0 tokens forwarded)"))
    legend_height = len(legend) * LEGEND_LINE + 8
    panels_top = TITLE + legend_height
    height = panels_top + len(groups) * (PANEL_TOP + PANEL_HEIGHT + PANEL_BOTTOM) + 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{LEFT}" y="20" font-size="15" font-weight="bold">budget_hook replay: input tokens per '
             f'request, by model group</text>']
    for n, (colour, kind, label) in enumerate(legend):
        y = TITLE + n * LEGEND_LINE + 10
        parts.append('<g class="legend">' + _swatch(LEFT, y, colour, kind)
                     + f'<text x="{LEFT + 30}" y="{y + 4}">{escape(label)}</text></g>')
    if not groups:
        parts.append(f'<text x="{LEFT}" y="{panels_top + 20}">no requests to draw</text>')
    for index, group in enumerate(groups):
        top = panels_top + index * (PANEL_TOP + PANEL_HEIGHT + PANEL_BOTTOM) + PANEL_TOP
        parts.append(_panel(group, {name: [r for r in runs[name] if r.get("model_group") == group
                                           and r.get("tokens_before") is not None] for name in names}, top))
    parts.append("</svg>")
    return "\n".join(parts)


def _swatch(x: float, y: float, colour: str, kind: str) -> str:
    if kind == "cross":
        return f'<path d="M{x + 8},{y - 4}L{x + 16},{y + 4}M{x + 8},{y + 4}L{x + 16},{y - 4}" stroke="{colour}" ' \
               f'stroke-width="2"/>'
    dash = ' stroke-dasharray="5,4"' if kind == "dashed" else ""
    return f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>'


def _panel(group: str, runs: Mapping[str, Sequence[Mapping[str, Any]]], top: int) -> str:
    first = next(iter(runs.values()))
    peak = max([r["tokens_before"] or 0 for r in first] + [r.get("input_budget") or 0 for rows in runs.values()
                                                            for r in rows] + [1])
    y_ticks = nice_ticks(peak)
    y_max = y_ticks[-1]
    count = max(len(first), 2)
    inner = WIDTH - LEFT - RIGHT

    def px(i: float) -> float:
        return LEFT + inner * i / (count - 1)

    def py(tokens: float) -> float:
        return top + PANEL_HEIGHT * (1 - tokens / y_max)

    def point(i: int, tokens: float) -> str:
        return f"{px(i):.1f},{py(tokens):.1f}"

    bottom = top + PANEL_HEIGHT
    out = [f'<g class="panel" data-group="{escape(group)}">',
           f'<text x="{LEFT}" y="{top - 8}" font-weight="bold">{escape(group)}: {len(first)} requests</text>',
           f'<rect x="{LEFT}" y="{top}" width="{inner}" height="{PANEL_HEIGHT}" fill="none" stroke="#bbb"/>']
    for value in y_ticks:  # y axis: ticks, labels, a faint grid
        y = py(value)
        out.append(f'<line class="tick" x1="{LEFT - 5}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#333"/>'
                   f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + inner}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{_tokens(value)}</text>')
    for value in nice_ticks(len(first), 8):  # x axis: request numbers (1-based), at round numbers
        number = max(1, int(value))
        if number > len(first):
            continue
        x = px(number - 1)
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{number}</text>')
    out.append(f'<text class="axis-label" x="{LEFT + inner / 2:.1f}" y="{bottom + 38}" text-anchor="middle">'
               f'request # (in replay order)</text>')
    middle = top + PANEL_HEIGHT / 2
    out.append(f'<text class="axis-label" x="18" y="{middle:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 18 {middle:.1f})">input tokens</text>')
    out.append(_line([point(i, r["tokens_before"] or 0) for i, r in enumerate(first)], GREY))
    for n, rows in enumerate(runs.values()):
        colour = COLOURS[n % len(COLOURS)]
        budgets = [point(i, r["input_budget"]) for i, r in enumerate(rows) if r.get("input_budget")]
        if budgets:
            out.append(_line(budgets, colour, dashed=True))
        out.append(_line([point(i, 0 if r["action"] in BLOCKED else r.get("tokens_after") or 0)
                          for i, r in enumerate(rows)], colour))
        for i, row in enumerate(rows):
            if row["action"] in BLOCKED:
                x, y = px(i), py(0)
                out.append(f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}'
                           f'L{x + 4:.1f},{y - 4:.1f}" stroke="{RED}" stroke-width="2"/>')
    out.append("</g>")
    return "\n".join(out)


def _line(points: list[str], colour: str, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>'
