"""The replay page's figures as SVG, written here from the page's own numbers (no plotting
library): a dot-and-whisker chart per rung (the ladder), and an x-y chart of series with
error bars (the culler frontier, the sensitivity to a demand figure).

Every function is pure: numbers in, the SVG document out. Missing values (``nan``, ``inf``)
are left out of a chart and named in its note, never drawn at an edge."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 720
FONT = "font-family='sans-serif' font-size='12'"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
LEFT, RIGHT, TOP, BOTTOM = 150, 30, 40, 50
CHAR_W = 7.0
"""A generous width of one character of the 12 px font, for the room a row's label takes."""
NOTE_CHAR_W = 6.0
"""The same for the 11 px font of a chart's note."""


@dataclass(frozen=True)
class Point:
    """A value with its 95% interval (``low`` = ``high`` = ``value`` when it has none)."""

    value: float
    low: float
    high: float
    label: str = ""
    hollow: bool = False
    """Drawn as an open marker: a value on weaker terms (its chart's note says which)."""

    @property
    def drawn(self) -> bool:
        return math.isfinite(self.value)


@dataclass(frozen=True)
class Series:
    name: str
    xs: Sequence[float]
    points: Sequence[Point]


def _ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round ticks covering [low, high]."""
    span = max(high - low, 1e-9)
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for k in (1, 2, 2.5, 5, 10):
        if raw <= k * step:
            step *= k
            break
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    ticks = [round(k * step, 10) for k in range(first, last + 1)]
    return ticks


def _tick_text(t: float) -> str:
    return f"{t:g}"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _document(
    height: int,
    body: list[str],
    title: str,
    note: str,
    width: float = WIDTH,
    left: float = LEFT,
) -> str:
    lines = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height}'"
        f" viewBox='0 0 {width:.0f} {height}' {FONT}>",
        f"<rect width='{width:.0f}' height='{height}' fill='white'/>",
        f"<text x='{width / 2:.0f}' y='20' text-anchor='middle' font-size='14'"
        f" font-weight='bold'>{escape(title)}</text>",
        *body,
    ]
    if note:  # under the plot, or further left as far as it needs to end in the picture
        x = max(8.0, min(left, width - 8 - NOTE_CHAR_W * len(note)))
        lines.append(
            f"<text x='{x:.0f}' y='{height - 8}' fill='#555' font-size='11'>{escape(note)}</text>"
        )
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def _marker(x: float, y: float, colour: str, hollow: bool) -> str:
    fill = "white" if hollow else colour
    return (
        f"<circle cx='{x:.1f}' cy='{y:.1f}' r='4.5' fill='{fill}' stroke='{colour}'"
        " stroke-width='1.6'/>"
    )


def intervals(
    title: str,
    axis: str,
    rows: Sequence[tuple[str, Sequence[Point]]],
    names: Sequence[str],
    *,
    reference: float | None = None,
    note: str = "",
) -> str:
    """A dot-and-whisker chart: a row per label, a dot per series (``names``) with its 95%
    interval, along a horizontal ``axis``; a dashed line at ``reference``."""
    row_h = 14 + 12 * len(names)
    height = TOP + BOTTOM + row_h * len(rows) + 24 * (len(names) > 1)
    values = _finite(
        [v for _label, points in rows for p in points if p.drawn for v in (p.low, p.high)]
    )
    if reference is not None:
        values.append(reference)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    ticks = _ticks(low, high)
    low, high = min(low, ticks[0]), max(high, ticks[-1])
    left = max(LEFT, 16 + CHAR_W * max((len(label) for label, _p in rows), default=0))
    width = max(WIDTH, left + 360 + RIGHT)
    plot_w = width - left - RIGHT

    def x_of(v: float) -> float:
        return left + plot_w * (v - low) / ((high - low) or 1.0)

    bottom = TOP + row_h * len(rows)
    body = []
    for t in ticks:
        x = x_of(t)
        body.append(
            f"<line x1='{x:.1f}' y1='{TOP}' x2='{x:.1f}' y2='{bottom}' stroke='#ddd'/>"
            f"<text x='{x:.1f}' y='{bottom + 16}' text-anchor='middle'>{_tick_text(t)}</text>"
        )
    body.append(
        f"<text x='{left + plot_w / 2:.0f}' y='{bottom + 34}' text-anchor='middle'>"
        f"{escape(axis)}</text>"
    )
    if reference is not None:
        x = x_of(reference)
        body.append(
            f"<line x1='{x:.1f}' y1='{TOP}' x2='{x:.1f}' y2='{bottom}' stroke='#888'"
            " stroke-dasharray='4 3'/>"
        )
    for r, (label, points) in enumerate(rows):
        y0 = TOP + r * row_h
        body.append(
            f"<text x='{left - 8}' y='{y0 + row_h / 2 + 4:.1f}' text-anchor='end'>"
            f"{escape(label)}</text>"
        )
        for k, p in enumerate(points):
            if not p.drawn:
                continue
            y = y0 + 13 + 12 * k
            colour = COLOURS[k % len(COLOURS)]
            lo, hi = (x_of(v) for v in (p.low, p.high))
            body.append(
                f"<line x1='{lo:.1f}' y1='{y:.1f}' x2='{hi:.1f}' y2='{y:.1f}'"
                f" stroke='{colour}' stroke-width='1.6'/>"
            )
            body.append(_marker(x_of(p.value), y, colour, p.hollow))
    if len(names) > 1:
        body += _legend(names, bottom + 56, left)
    return _document(height + 10, body, title, note, width, left)


def _legend(names: Sequence[str], y: float, left: float = LEFT) -> list[str]:
    out = []
    x = float(left)
    for k, name in enumerate(names):
        colour = COLOURS[k % len(COLOURS)]
        out.append(_marker(x, y - 4, colour, False))
        out.append(f"<text x='{x + 10:.1f}' y='{y:.1f}'>{escape(name)}</text>")
        x += 24 + 7 * len(name)
    return out


def xy(
    title: str,
    x_axis: str,
    y_axis: str,
    series: Sequence[Series],
    *,
    x_errors: Sequence[Sequence[Point]] | None = None,
    note: str = "",
    labels: bool = False,
) -> str:
    """Series as lines through their points, each with its vertical 95% interval (and, with
    ``x_errors``, a horizontal one per point); ``labels`` writes each point's label by it."""
    height = 420
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM - 40
    xs, ys = _xy_extent(series, x_errors)
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    x_ticks, y_ticks = _ticks(x_lo, x_hi), _ticks(y_lo, y_hi)
    frame = _Frame(
        min(x_lo, x_ticks[0]),
        max(x_hi, x_ticks[-1]),
        min(y_lo, y_ticks[0]),
        max(y_hi, y_ticks[-1]),
        plot_w,
        plot_h,
    )
    px, py = frame.px, frame.py
    bottom = TOP + plot_h
    body = []
    for t in x_ticks:
        body.append(
            f"<line x1='{px(t):.1f}' y1='{TOP}' x2='{px(t):.1f}' y2='{bottom}' stroke='#eee'/>"
            f"<text x='{px(t):.1f}' y='{bottom + 16}' text-anchor='middle'>{_tick_text(t)}</text>"
        )
    for t in y_ticks:
        body.append(
            f"<line x1='{LEFT}' y1='{py(t):.1f}' x2='{LEFT + plot_w}' y2='{py(t):.1f}'"
            f" stroke='#eee'/><text x='{LEFT - 6}' y='{py(t) + 4:.1f}' text-anchor='end'>"
            f"{_tick_text(t)}</text>"
        )
    body.append(
        f"<text x='{LEFT + plot_w / 2:.0f}' y='{bottom + 34}' text-anchor='middle'>"
        f"{escape(x_axis)}</text>"
        f"<text x='{LEFT - 50}' y='{TOP + plot_h / 2:.0f}' text-anchor='middle'"
        f" transform='rotate(-90 {LEFT - 50} {TOP + plot_h / 2:.0f})'>{escape(y_axis)}</text>"
    )
    for k, s in enumerate(series):
        errors = x_errors[k] if x_errors is not None else None
        body += _xy_series(s, COLOURS[k % len(COLOURS)], errors, frame, labels)
    body += _legend([s.name for s in series], bottom + 56)
    return _document(height + 20, body, title, note)


@dataclass(frozen=True)
class _Frame:
    """An xy plot's value ranges and plotting area: values to pixels."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    plot_w: float
    plot_h: float

    def px(self, v: float) -> float:
        return LEFT + self.plot_w * (v - self.x_lo) / ((self.x_hi - self.x_lo) or 1.0)

    def py(self, v: float) -> float:
        return TOP + self.plot_h * (1 - (v - self.y_lo) / ((self.y_hi - self.y_lo) or 1.0))


def _xy_extent(
    series: Sequence[Series], x_errors: Sequence[Sequence[Point]] | None
) -> tuple[list[float], list[float]]:
    """The finite x and y values an xy plot must show: each drawn point, its interval and
    (with ``x_errors``) its horizontal one."""
    xs: list[float] = []
    ys: list[float] = []
    for k, s in enumerate(series):
        for j, (x, p) in enumerate(zip(s.xs, s.points, strict=True)):
            if not p.drawn:
                continue
            xs.append(x)
            ys += [p.low, p.high, p.value]
            if x_errors is not None:
                e = x_errors[k][j]
                xs += [e.low, e.high] if e.drawn else []
    return _finite(xs), _finite(ys)


def _xy_series(
    s: Series, colour: str, errors: Sequence[Point] | None, frame: _Frame, labels: bool
) -> list[str]:
    """One series of an xy plot: its line, and each drawn point's intervals, marker and
    (with ``labels``) label."""
    px, py = frame.px, frame.py
    body = []
    drawn = [(x, p) for x, p in zip(s.xs, s.points, strict=True) if p.drawn]
    if len(drawn) > 1:
        path = " ".join(f"{px(x):.1f},{py(p.value):.1f}" for x, p in drawn)
        body.append(f"<polyline points='{path}' fill='none' stroke='{colour}' stroke-width='1.4'/>")
    for j, (x, p) in enumerate(zip(s.xs, s.points, strict=True)):
        if not p.drawn:
            continue
        body.append(
            f"<line x1='{px(x):.1f}' y1='{py(p.low):.1f}' x2='{px(x):.1f}'"
            f" y2='{py(p.high):.1f}' stroke='{colour}' stroke-width='1.4'/>"
        )
        if errors is not None and errors[j].drawn:
            e = errors[j]
            body.append(
                f"<line x1='{px(e.low):.1f}' y1='{py(p.value):.1f}' x2='{px(e.high):.1f}'"
                f" y2='{py(p.value):.1f}' stroke='{colour}' stroke-width='1' opacity='0.6'/>"
            )
        body.append(_marker(px(x), py(p.value), colour, p.hollow))
        if labels and p.label:
            body.append(
                f"<text x='{px(x) + 7:.1f}' y='{py(p.value) - 6:.1f}' font-size='10'"
                f" fill='{colour}'>{escape(p.label)}</text>"
            )
    return body
