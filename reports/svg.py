"""Inline SVG pictures: charts over time with fault windows, partition logs, timelines.

Plain SVG strings, no JavaScript and no external files, so the page stays
one self-contained file. Hover text is SVG <title>. Every label passes
through `esc` because labels carry broker and history data.
"""

from __future__ import annotations

from dataclasses import dataclass

from ground.faults import CHART_COLOURS
from reports.markup import esc

STATUS_COLOURS = {
    "read": "#2e9e5b",
    "acked-unread": "#f5c542",
    "lost": "#d62728",
    "unseen": "#ff7f0e",
    "duplicate": "#9467bd",
    "aborted": "#111111",
    "inconsistent": "#e377c2",
    "unacked": "#9ecae1",
}
STATUS_MEANING = {
    "read": "read by a consumer",
    "acked-unread": "acknowledged, not (yet) read",
    "lost": "acknowledged, then lost",
    "unseen": "acknowledged, never seen",
    "duplicate": "a second copy of a value",
    "aborted": "aborted or failed write, yet read",
    "inconsistent": "different values at this offset",
    "unacked": "read, but its send was not acknowledged",
}
HIGHLIGHT = "#00b8d9"  # outline of cells an anomaly names: unlike every status colour
OUTCOME_COLOURS = {"ok": "#2e9e5b", "fail": "#d62728", "info": "#f0a202"}


@dataclass(frozen=True)
class FaultWindow:
    start: float
    stop: float | None
    label: str
    kind: str


@dataclass(frozen=True)
class Mark:
    """A moment to point at on time charts, e.g. when an anomaly's op completed."""

    at: float
    label: str


@dataclass(frozen=True)
class Series:
    label: str
    colour: str
    points: list  # [(x, y)]
    dash: str = ""


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def _ticks(maximum: float, count: int = 5) -> list[float]:
    return [maximum * i / count for i in range(count + 1)]


def _time_ticks(maximum: float) -> list[float]:
    """Round tick positions (1, 2, 5, 10, 15, 30, 60 ... s) so labels read easily."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600):
        if maximum / step <= 10:
            break
    count = int(maximum / step + 1e-9)
    return [i * step for i in range(count + 1)]


def _tick_text(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def _fault_bands(windows, x_of, top, bottom, x_end, show_labels=True, right=None) -> list[str]:
    """Shaded windows; labels go in the first of three rows where they fit, else only on hover."""
    out = []
    row_ends = [float("-inf")] * 3
    for window in windows:
        stop = window.stop if window.stop is not None else x_end
        x0, x1 = x_of(window.start), x_of(stop)
        colour = CHART_COLOURS.get(window.kind, CHART_COLOURS["other"])
        still = "" if window.stop is not None else " (never healed)"
        out.append(
            f'<rect class="fault" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 2):.1f}" '
            f'height="{bottom - top}" fill="{colour}" fill-opacity="0.16" stroke="{colour}" '
            f'stroke-opacity="0.5"><title>{esc(window.label)}{still}: '
            f"{window.start:.1f}s - {stop:.1f}s</title></rect>"
        )
        if show_labels:
            text_w = 6.0 * len(window.label) + 4
            fits = [i for i, end in enumerate(row_ends) if end < x0 and (right is None or x0 + text_w <= right)]
            if not fits:
                continue
            row = fits[0]
            row_ends[row] = x0 + text_w
            y = top + 11 + 11 * row
            out.append(
                f'<text x="{x0 + 3:.1f}" y="{y}" font-size="10" fill="{colour}" '
                f'font-weight="bold">{esc(window.label)}</text>'
            )
    return out


def line_chart(
    series: list[Series],
    x_max: float,
    windows: list[FaultWindow],
    *,
    title: str,
    y_label: str,
    width: int = 1240,
    height: int = 220,
    marks=(),
) -> str:
    """A time chart (x in seconds) with each fault window shaded and labelled."""
    left, right, top, bottom = 56, width - 150, 22, height - 28
    x_max = max(x_max, 1e-9)
    y_max = _nice_max(max((y for s in series for _, y in s.points), default=0.0))

    def x_of(x: float) -> float:
        return left + (right - left) * min(max(x, 0.0), x_max) / x_max

    def y_of(y: float) -> float:
        return bottom - (bottom - top) * y / y_max

    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="{left}" y="14" font-size="12" font-weight="bold">{esc(title)}</text>',
    ]
    parts += _fault_bands(windows, x_of, top, bottom, x_max, right=right)
    for tick in _ticks(y_max):
        y = y_of(tick)
        parts.append(
            f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{_tick_text(tick)}</text>'
        )
    for tick in _time_ticks(x_max):
        x = x_of(tick)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#666"/>'
            f'<text x="{x:.1f}" y="{bottom + 15}" font-size="10" text-anchor="middle">{tick:g}s</text>'
        )
    # a few marks get a line down the chart; many would hide the data, so then only triangles
    lines = len(marks) <= 8
    for mark in marks:
        x = x_of(mark.at)
        line = (
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="#7a0010" stroke-dasharray="2 2"/>'
            if lines
            else ""
        )
        parts.append(
            f'<g class="mark">{line}<path d="M{x - 5:.1f},{top - 8} L{x + 5:.1f},{top - 8} L{x:.1f},{top} Z" '
            f'fill="#c0172b"/><title>{esc(mark.label)} at {mark.at:.2f}s</title></g>'
        )
    parts.append(
        f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#666"/>'
        f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="#666"/>'
        f'<text x="12" y="{(top + bottom) / 2:.0f}" font-size="10" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top + bottom) / 2:.0f})">{esc(y_label)}</text>'
    )
    for number, line in enumerate(series):
        if not line.points:
            continue
        points = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in line.points)
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        if len(line.points) == 1:
            x, y = line.points[0]
            parts.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3" fill="{line.colour}"/>')
        parts.append(
            f'<polyline fill="none" stroke="{line.colour}" stroke-width="1.6"{dash} points="{points}">'
            f"<title>{esc(line.label)}</title></polyline>"
        )
        ly = top + 6 + 15 * number
        parts.append(
            f'<line x1="{right + 10}" x2="{right + 30}" y1="{ly}" y2="{ly}" stroke="{line.colour}" '
            f'stroke-width="2.5"{dash}/><text x="{right + 35}" y="{ly + 4}" font-size="11">{esc(line.label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def partition_log(offsets: list[dict], *, highlight: set | None = None, columns: int = 50, cell: int = 14) -> str:
    """A partition's log as a grid of cells, one per offset, coloured by status."""
    highlight = highlight or set()
    rows = max(1, -(-len(offsets) // columns))
    label_w = 64
    width = label_w + columns * cell + 4
    height = rows * cell + 6
    parts = [
        f'<svg class="plog" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="partition log">'
    ]
    for number, entry in enumerate(offsets):
        row, column = divmod(number, columns)
        x, y = label_w + column * cell, 2 + row * cell
        if column == 0:
            parts.append(
                f'<text x="{label_w - 4}" y="{y + cell - 3}" font-size="10" text-anchor="end">'
                f"{esc(entry.get('offset'))}</text>"
            )
        status = str(entry.get("status", "?"))
        colour = STATUS_COLOURS.get(status, "#cccccc")
        offset = entry.get("offset")
        strong = offset in highlight
        stroke = f' stroke="{HIGHLIGHT}" stroke-width="3"' if strong else ' stroke="#fff" stroke-width="1"'
        values = entry.get("values")
        parts.append(
            f'<rect class="cell status-{esc(status)}" x="{x}" y="{y}" width="{cell}" height="{cell}" '
            f'fill="{colour}"{stroke}><title>offset {esc(offset)}: value(s) {esc(values)}, '
            f"{esc(status)}</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)


def status_legend(statuses) -> str:
    """HTML legend for partition-log colours (only statuses that occur, plus the common ones)."""
    items = []
    for status in STATUS_COLOURS:
        if status in statuses or status in ("read", "acked-unread", "lost"):
            items.append(
                f'<span class="swatch" style="background:{STATUS_COLOURS[status]}"></span>'
                f"<b>{esc(status)}</b> {esc(STATUS_MEANING[status])}"
            )
    for status in sorted(set(statuses) - set(STATUS_COLOURS)):
        items.append(f'<span class="swatch" style="background:#cccccc"></span><b>{esc(status)}</b>')
    items.append(
        f'<span class="swatch" style="background:#fff;border:3px solid {HIGHLIGHT}"></span>'
        "<b>outlined</b> offset named by an anomaly"
    )
    return '<div class="legend">' + " &nbsp; ".join(items) + "</div>"


def process_timeline(ops, windows: list[FaultWindow], highlight: set, *, width: int = 1240) -> str:
    """Ops as bars per process over time; the anomaly's ops outlined in black."""
    timed = [o for o in ops if o.complete_time is not None]
    if not timed:
        return ""
    t0 = min((o.invoke_time if o.invoke_time is not None else o.complete_time) for o in timed) / 1e9
    t1 = max(o.complete_time for o in timed) / 1e9
    span = max(t1 - t0, 1e-3)
    t0 = max(0.0, t0 - span * 0.02)
    t1 += span * 0.02
    processes = sorted({o.process for o in timed}, key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p))
    lane = 18
    left, right, top = 90, width - 10, 16
    height = top + lane * len(processes) + 26

    def x_of(t: float) -> float:
        return left + (right - left) * (min(max(t, t0), t1) - t0) / (t1 - t0)

    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="operations per process">'
    ]
    visible = [
        FaultWindow(w.start, w.stop, w.label, w.kind)
        for w in windows
        if (w.stop is None or w.stop >= t0) and w.start <= t1
    ]
    parts += _fault_bands(visible, x_of, top, top + lane * len(processes), t1, right=right)
    for row, process in enumerate(processes):
        y = top + row * lane
        parts.append(
            f'<text x="{left - 6}" y="{y + lane - 5}" font-size="10" text-anchor="end">process {esc(process)}</text>'
            f'<line x1="{left}" x2="{right}" y1="{y + lane}" y2="{y + lane}" stroke="#eee"/>'
        )
    for o in timed:
        y = top + processes.index(o.process) * lane + 3
        start = (o.invoke_time if o.invoke_time is not None else o.complete_time) / 1e9
        stop = o.complete_time / 1e9
        x0, x1 = x_of(start), x_of(stop)
        colour = OUTCOME_COLOURS.get(o.type, "#999")
        strong = o.op in highlight
        stroke = ' stroke="#000" stroke-width="2.5"' if strong else ""
        tip = (
            f"op {o.op} process {o.process}: {o.f} {o.type} {start:.3f}s-{stop:.3f}s"
            + (f" error {o.error}" if o.error else "")
            + (f" [{o.summary()}]" if o.summary() else "")
        )
        parts.append(
            f'<rect class="op{" involved" if strong else ""}" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 3):.1f}" '
            f'height="{lane - 6}" fill="{colour}"{stroke}><title>{esc(tip)}</title></rect>'
        )
        if strong:
            parts.append(
                f'<text x="{max(x1, x0 + 3) + 3:.1f}" y="{y + lane - 8}" font-size="10" font-weight="bold">'
                f"op {esc(o.op)} {esc(o.f)} {esc(o.type)}</text>"
            )
    axis_y = top + lane * len(processes)
    for i in range(6):
        t = t0 + (t1 - t0) * i / 5
        anchor = "start" if i == 0 else "end" if i == 5 else "middle"
        parts.append(f'<text x="{x_of(t):.1f}" y="{axis_y + 14}" font-size="10" text-anchor="{anchor}">{t:.2f}s</text>')
    parts.append("</svg>")
    return "".join(parts)
