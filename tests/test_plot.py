"""``replay --plot`` as a picture an operator would put in a review (issue 22, 9): a legend that fits, both
axes labelled and ticked, one panel per group, no empty space, checked by rendering the SVG to PNG (cairosvg
in .venv-clients, on the system's libcairo; scripts/clients.sh installs it)."""

from __future__ import annotations

import itertools
import re
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from budget_hook import replay
from budget_hook.plot import WIDTH, nice_ticks, svg

from .test_replay import CONFIG, _traffic

ROOT = Path(__file__).resolve().parents[1]
RENDERER = ROOT / ".venv-clients" / "bin" / "python"
NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def picture(tmp_path) -> str:
    path = tmp_path / "traffic.jsonl"
    _traffic(path)
    items = replay.load_items(path)
    return svg({"current policy": replay.replay(items, CONFIG),
                "with max_input_tokens=300": replay.replay(replay.load_items(path), CONFIG, {"max_input_tokens": 300})})


def test_ticks_are_round_and_cover_the_peak():
    assert nice_ticks(9321) == [0, 2000, 4000, 6000, 8000, 10000]
    assert nice_ticks(3) == [0, 1, 2, 3]
    assert nice_ticks(0)[-1] >= 1


def test_the_svg_has_axes_labels_ticks_a_fitting_legend_and_a_panel_per_group(picture):
    root = ET.fromstring(picture)
    width, height = int(root.get("width")), int(root.get("height"))
    groups = {row for row in re.findall(r'data-group="([^"]+)"', picture)}
    panels = root.findall(f"{NS}g[@class='panel']")
    assert len(panels) == len(groups) >= 1
    for panel in panels:
        labels = [t.text for t in panel.iter(f"{NS}text") if t.get("class") == "axis-label"]
        assert labels == ["request # (in replay order)", "input tokens"]
        assert len([e for e in panel.iter(f"{NS}line") if e.get("class") == "tick"]) >= 4
    for entry in root.findall(f"{NS}g[@class='legend']"):  # every legend line fits the width (7 px a character)
        [text] = entry.findall(f"{NS}text")
        assert float(text.get("x")) + 7 * len(text.text) <= width, text.text
    texts = [float(t.get("y")) for t in root.iter(f"{NS}text")]
    assert max(texts) <= height and height - max(texts) < 20  # no empty space below the last panel


def _png_size_and_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    chunks, position = b"", 8
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind == b"IDAT":
            chunks += data[position + 8:position + 8 + length]
        position += 12 + length
    raw = zlib.decompress(chunks)
    channels = {6: 4, 2: 3}[colour]
    stride = width * channels + 1
    rows, previous = [], bytearray(stride - 1)
    for y in range(height):  # undo the PNG filters, row by row
        kind, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
        for x in range(len(line)):
            a = line[x - channels] if x >= channels else 0
            b, c = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    assert depth == 8
    return width, height, rows


def test_the_picture_renders_to_png_with_ink_from_top_to_bottom(picture, tmp_path):
    if not RENDERER.exists():
        pytest.skip("no .venv-clients (scripts/clients.sh makes it): no SVG renderer to check the picture with")
    (tmp_path / "plot.svg").write_text(picture, encoding="utf-8")
    done = subprocess.run([str(RENDERER), "-c", "import sys, cairosvg; cairosvg.svg2png(url=sys.argv[1], "
                           "write_to=sys.argv[2])", str(tmp_path / "plot.svg"), str(tmp_path / "plot.png")],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and "No module named 'cairosvg'" in done.stderr:
        pytest.skip("cairosvg is not installed in .venv-clients")
    assert done.returncode == 0, done.stderr
    width, height, rows = _png_size_and_rows((tmp_path / "plot.png").read_bytes())
    root = ET.fromstring(picture)
    assert (width, height) == (WIDTH, int(root.get("height")))
    inked = [y for y, row in enumerate(rows) if any(v < 200 for v in row)]
    assert inked[0] < 30 and height - inked[-1] < 25  # the title at the top, axis labels at the bottom
    gaps = [b - a for a, b in itertools.pairwise(inked)]
    assert max(gaps) < 60  # no band of empty space anywhere
    channels = len(rows[0]) // width
    right = max(x // channels for row in rows for x in range(0, len(row), channels) if min(row[x:x + 3]) < 200)
    assert right < width - 10  # nothing runs into the right edge (a clipped legend or label would)
