"""``budget-hook replay --plot``: what the gateway did to each request, as an SVG picture (pure, stdlib).

Contract: ``svg(runs)`` takes ``{run name: replay rows}`` (``replay.replay``'s rows, the first run being the
current policy) and returns an SVG document: one panel per model group (the ``max_groups`` busiest), the
requests in the order they were replayed along x, tokens along y. Grey: the tokens each request had; one
coloured line per run: the tokens it forwarded (a blocked request drops to 0 and is marked with a cross);
dashed, in the run's colour: its input budget. A run that trims more sits lower; a cross is a request a
client saw refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 900, 220, 70, 20, 44, 36
COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
BLOCKED = ("blocked", "would_block")


def svg(runs: Mapping[str, Sequence[Mapping[str, Any]]], max_groups: int = 6) -> str:
    names = list(runs)
    first = runs[names[0]] if names else []
    counts: dict[str, int] = {}
    for row in first:
        if row.get("tokens_before") is not None:
            counts[row["model_group"]] = counts.get(row["model_group"], 0) + 1
    groups = sorted(counts, key=lambda g: -counts[g])[:max_groups]
    height = TOP + len(groups) * (PANEL_HEIGHT + BOTTOM) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'font-family="sans-serif" font-size="11">', f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    legend = [("#999999", "tokens the request had")] + [(COLOURS[i % len(COLOURS)], f"forwarded: {name}")
                                                       for i, name in enumerate(names)]
    legend.append(("#777777", "dashed: each run's input budget"))
    x = LEFT
    for colour, label in legend:
        parts.append(f'<rect x="{x}" y="8" width="12" height="4" fill="{colour}"/>'
                     f'<text x="{x + 16}" y="14">{escape(label)}</text>')
        x += 24 + 6 * len(label)
    for index, group in enumerate(groups):
        top = TOP + index * (PANEL_HEIGHT + BOTTOM)
        parts.append(_panel(group, {name: [r for r in runs[name] if r.get("model_group") == group
                                           and r.get("tokens_before") is not None] for name in names}, top))
    parts.append("</svg>")
    return "\n".join(parts)


def _panel(group: str, runs: Mapping[str, Sequence[Mapping[str, Any]]], top: int) -> str:
    first = next(iter(runs.values()))
    peak = max([r["tokens_before"] or 0 for r in first] + [r.get("input_budget") or 0 for rows in runs.values()
                                                            for r in rows] + [1])
    count = max(len(first), 2)
    inner = WIDTH - LEFT - RIGHT

    def point(i: int, tokens: float) -> str:
        return f"{LEFT + inner * i / (count - 1):.1f},{top + PANEL_HEIGHT * (1 - tokens / peak):.1f}"

    out = [f'<text x="{LEFT}" y="{top - 4}" font-weight="bold">{escape(group)} ({len(first)} requests)</text>',
           f'<rect x="{LEFT}" y="{top}" width="{inner}" height="{PANEL_HEIGHT}" fill="none" stroke="#ccc"/>']
    for fraction in (0, 0.5, 1):
        y = top + PANEL_HEIGHT * (1 - fraction)
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{round(peak * fraction):,}</text>')
    out.append(_line([point(i, r["tokens_before"] or 0) for i, r in enumerate(first)], "#999999"))
    for n, rows in enumerate(runs.values()):
        colour = COLOURS[n % len(COLOURS)]
        budgets = [point(i, r["input_budget"]) for i, r in enumerate(rows) if r.get("input_budget")]
        if budgets:
            out.append(_line(budgets, colour, dashed=True))
        out.append(_line([point(i, 0 if r["action"] in BLOCKED else r.get("tokens_after") or 0)
                          for i, r in enumerate(rows)], colour))
        for i, row in enumerate(rows):
            if row["action"] in BLOCKED:
                x, y = (float(v) for v in point(i, 0).split(","))
                out.append(f'<path d="M{x - 4},{y - 4}L{x + 4},{y + 4}M{x - 4},{y + 4}L{x + 4},{y - 4}" '
                           f'stroke="#d62728" stroke-width="2"/>')
    return "\n".join(out)


def _line(points: list[str], colour: str, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>'
