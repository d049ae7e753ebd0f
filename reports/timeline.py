"""Ops around each anomaly, read from history.jsonl in one streaming pass.

A history can hold millions of events; the report needs only a few hundred
of them (the ops an anomaly names and their neighbours), so the file is read
once, line by line, and only lines inside a window (or invokes, to pair them
with completions) are parsed. Memory stays O(processes + collected ops).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Op:
    """An invoke paired with its completion; `op` is the completion's index."""

    op: int
    process: str
    f: str
    type: str
    invoke_time: int | None
    complete_time: int | None
    error: str | None = None
    mops: list = field(default_factory=list)
    value: object = None

    def summary(self, limit: int = 6) -> str:
        """A short text of what the op did, e.g. 'send 3=118@41, poll 3=117@40'."""
        parts = []
        for mop in self.mops[:limit]:
            if not isinstance(mop, dict):
                continue
            text = f"{mop.get('f', '?')} {mop.get('key', '')}"
            if "value" in mop:
                text += f"={mop.get('value')}"
            if mop.get("offset") is not None:
                text += f"@{mop.get('offset')}"
            parts.append(text.strip())
        if len(self.mops) > limit:
            parts.append(f"... {len(self.mops) - limit} more")
        if self.value is not None:
            parts.append(json.dumps(self.value, sort_keys=True)[:200])
        return ", ".join(parts)


@dataclass
class Windows:
    """Collected ops by id; `found` says whether a history was read at all."""

    ops: dict[int, Op]
    found: bool
    note: str | None = None

    def clusters(self, op_ids, radius: int) -> list[list[Op]]:
        """Ops around ``op_ids``, split where the windows do not touch (ops far apart get own pictures)."""
        ranges = _merge([(c - radius, c + radius) for c in op_ids])
        out = []
        for lo, hi in ranges:
            group = [op for op in self.around([(lo + hi) // 2], (hi - lo) // 2 + 1)]
            if group:
                out.append(group)
        return out

    def around(self, op_ids, radius: int) -> list[Op]:
        """The collected ops whose id lies within ``radius`` events of any of ``op_ids``."""
        ids = sorted(self.ops)
        picked: set[int] = set()
        for center in op_ids:
            lo = bisect.bisect_left(ids, center - radius)
            hi = bisect.bisect_right(ids, center + radius)
            picked.update(ids[lo:hi])
        return [self.ops[i] for i in sorted(picked)]


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def collect(history: Path, op_ids, radius: int = 40) -> Windows:
    """Every op completing within ``radius`` events of an id in ``op_ids``.

    Relies on the history contract that event `index` equals the line
    number (0-based, contiguous); the parsed index is used when present.
    """
    centers = sorted({int(i) for i in op_ids if isinstance(i, int) or str(i).isdigit()})
    if not history.exists():
        return Windows({}, False, "history.jsonl is missing, so no timelines")
    if not centers:
        return Windows({}, True)
    ranges = _merge([(max(0, c - radius), c + radius) for c in centers])
    starts = [lo for lo, _ in ranges]
    last_invoke: dict[str, dict] = {}
    ops: dict[int, Op] = {}
    end = ranges[-1][1]
    with history.open("r", encoding="utf-8") as lines:
        for line_no, line in enumerate(lines):
            if line_no > end:
                break
            slot = bisect.bisect_right(starts, line_no) - 1
            inside = slot >= 0 and line_no <= ranges[slot][1]
            if not inside and "invoke" not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            process = str(event.get("process"))
            kind = event.get("type")
            if kind == "invoke":
                last_invoke[process] = event
                continue
            if not inside:
                continue
            invoke = last_invoke.pop(process, None) or {}
            index = event.get("index", line_no)
            ops[index] = Op(
                op=index,
                process=process,
                f=str(event.get("f", invoke.get("f", "?"))),
                type=str(kind),
                invoke_time=invoke.get("time"),
                complete_time=event.get("time"),
                error=event.get("error"),
                mops=event.get("mops") or invoke.get("mops") or [],
                value=event.get("value"),
            )
    return Windows(ops, True)
