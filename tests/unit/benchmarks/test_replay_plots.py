"""The page's figures: well-formed SVG, every finite value drawn where its scale puts it,
missing values left out rather than drawn at an edge."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

from benchmarks.replay import plots
from benchmarks.replay.plots import Point, Series

NS = "{http://www.w3.org/2000/svg}"


def _circles(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{NS}circle"))


def test_intervals_draw_a_dot_and_whisker_per_value_on_one_scale() -> None:
    rows = [
        ("B1", [Point(1.0, 1.0, 1.0), Point(0.5, 0.4, 0.6)]),
        ("L2", [Point(1.5, 1.4, 1.7), Point(math.nan, math.nan, math.nan)]),
        ("L1i", [Point(1.2, 1.1, 1.3, hollow=True), Point(math.inf, 1.0, 2.0)]),
    ]
    svg = plots.intervals("t", "×", rows, ["against B1", "against L1i"], reference=1.0)
    circles = _circles(svg)
    markers = [c for c in circles if c.get("r") == "4.5"]
    assert len(markers) == 4 + 2  # four values, two legend entries; nan and inf left out
    xs = {float(c.get("cx", "0")) for c in markers[:4]}
    assert len(xs) == 4
    by_value = sorted(markers[:4], key=lambda c: float(c.get("cx", "0")))
    assert [c.get("fill") == "white" for c in by_value] == [False, False, True, False]


def test_xy_draws_series_with_intervals_and_labels() -> None:
    series = [
        Series(
            "idle-culler", [28.5, 2.5], [Point(32.6, 31.0, 34.0, "30 min"), Point(35.3, 34, 36)]
        ),
        Series("gpuaas", [1.5], [Point(35.7, 34.0, 37.0, "as shipped")]),
    ]
    errors = [[Point(28.5, 26.0, 31.0), Point(2.5, 1.0, 4.0)], [Point(1.5, 0.5, 2.5)]]
    svg = plots.xy("frontier", "interrupted", "GPUs", series, x_errors=errors, labels=True)
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "30 min" in texts
    assert "as shipped" in texts
    assert len(list(root.iter(f"{NS}polyline"))) == 1  # a line only through two points or more
    markers = [c for c in root.iter(f"{NS}circle") if c.get("r") == "4.5"]
    ys = {c.get("cx"): float(c.get("cy", "0")) for c in markers[:3]}
    assert len(ys) == 3
    # a larger value is drawn higher (smaller y)
    assert min(ys.values()) < max(ys.values())


def test_ticks_cover_the_range_with_round_steps() -> None:
    ticks = plots._ticks(0.37, 1.62)
    assert ticks[0] <= 0.37
    assert ticks[-1] >= 1.62 - 1e-9
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    assert steps.pop() in (0.1, 0.2, 0.25, 0.5)


def test_the_frontier_figure_puts_each_culler_setting_at_its_interruptions() -> None:
    """A setting is drawn at the sessions it interrupts at its capacity size (x) and its
    capacity (y), labelled with its knob; one series per culler."""
    from benchmarks.replay import figures
    from benchmarks.replay.capacity import Levels, Search

    def search(interrupted: float, meets_from: int) -> Search:
        runs = {
            g: {
                0.5: [
                    {
                        "wait_p90_min": 30 * meets_from / g * (1 + 0.05 * k),
                        "spawn_wait_p90_min": 1.0,
                        "interrupted_per_100h": interrupted + k,
                        "seed": k,
                    }
                    for k in range(3)
                ]
            }
            for g in (29, 32, 36, 40, 45)
        }
        return Search("L1i", runs)

    settings = [
        figures.Frontier("30 min", "idle-culler", search(28.0, 32)),
        figures.Frontier("120 min", "idle-culler", search(2.0, 36)),
        figures.Frontier("as shipped", "gpuaas", search(1.0, 36)),
    ]
    svg = figures.frontier_figure(settings, 3, Levels(), resamples=50)
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert {"30 min", "120 min", "as shipped", "idle-culler", "gpuaas"} <= set(texts)
    markers = [c for c in root.iter(f"{NS}circle") if c.get("r") == "4.5"][:3]
    x30, x120 = (float(c.get("cx", "0")) for c in markers[:2])
    assert x30 > x120  # 29 interrupted per 100 h is further right than 3


def test_a_long_row_label_is_given_the_room_it_needs() -> None:
    """The margin grows with the longest label: its text ends at the plot and starts inside
    the picture, and the plot keeps its width."""
    label = "L2o  L2 idealised: own need, no placement"
    note = "open marker: meets the training and spawn levels only (no size run meets the" + (
        " interruption level)"
    )
    rows = [(label, [Point(30.0, 28.0, 33.0)])]
    svg = plots.intervals("t", "GPUs", rows, ["capacity"], note=note)
    root = ET.fromstring(svg)
    (text,) = [t for t in root.iter(f"{NS}text") if t.text == label]
    assert float(text.get("x", "0")) - plots.CHAR_W * len(label) >= 0
    width = float(root.get("width", "0"))
    ticks = [
        float(t.get("x", "0"))
        for t in root.iter(f"{NS}text")
        if (t.text or "").replace(".", "", 1).isdigit()
    ]
    assert ticks
    assert min(ticks) > float(text.get("x", "0"))
    assert max(ticks) <= width
    (written,) = [t for t in root.iter(f"{NS}text") if t.text == note]
    assert float(written.get("x", "0")) >= 0
    assert float(written.get("x", "0")) + plots.NOTE_CHAR_W * len(note) <= width
