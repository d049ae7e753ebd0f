"""Fault windows from the nemesis ops, and which faults were active at a given time.

Nemesis ops are a few per minute of run, so they are collected to the driver
(a small residue, never the history). A window runs from the `info`
completion of a fault's start op to that of its heal op (RESULTS.md).
"""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from checkers.load import Tables
from harness.netfaults import NETEM_EMULATED

# start f -> heal f
HEALS = {
    "start-partition": "stop-partition",
    "kill": "start",
    "pause": "resume",
    "start-netem": "stop-netem",
    "start-clock": "stop-clock",
    "bump-clock": "reset-clock",
}
HEAL_FS = set(HEALS.values())


def nemesis_ops(t: Tables) -> list[dict]:
    rows = (t.ops.where(F.col("process") == "nemesis")
            .select("op", "f", "type", "invoke_time", "complete_time", "value_json")
            .orderBy("op").collect())
    result = []
    for row in rows:
        try:
            value = json.loads(row["value_json"]) if row["value_json"] else None
        except ValueError:
            value = row["value_json"]
        result.append({"op": row["op"], "f": row["f"], "value": value,
                       "time": row["complete_time"] if row["complete_time"] is not None else row["invoke_time"]})
    return result


def _nodes(value) -> list[str]:
    """Node names a nemesis value mentions (every string inside its lists)."""
    found: list[str] = []

    def walk(item):
        if isinstance(item, str):
            if item not in found:
                found.append(item)
        elif isinstance(item, list):
            for sub in item:
                walk(sub)
        elif isinstance(item, dict):
            for key, sub in item.items():
                if key != "role" and isinstance(sub, (list, dict)):
                    walk(sub)
    walk(value)
    return found


def label(f: str, value) -> str:
    """A short human label: "kill n2", "partition n1 | n2 n3"."""
    base = f[len("start-"):] if f.startswith("start-") else f
    if isinstance(value, dict) and isinstance(value.get("isolated"), list):
        groups = [" ".join(str(n) for n in group) if isinstance(group, list) else str(group)
                  for group in value["isolated"]]
        text = f"{base} " + " | ".join(groups)
    else:
        nodes = _nodes(value)
        text = f"{base} {' '.join(nodes)}" if nodes else base
    if isinstance(value, dict) and isinstance(value.get("role"), str):
        text += f" ({value['role']})"
    if isinstance(value, dict) and isinstance(value.get("netem"), str):
        text += f": {value['netem']}"
        how = value.get("applied_by")
        # The emulation's timing is close to the qdisc's, not equal: say so.
        if isinstance(how, dict) and how and set(how.values()) == {NETEM_EMULATED}:
            text += " (emulated)"
    return text.strip()


def windows(ops: list[dict]) -> list[dict]:
    """One window per fault; a heal closes every open fault of its kind that
    shares a node with it (all of its kind when either names no node)."""
    result: list[dict] = []
    open_windows: list[dict] = []
    for op in ops:
        f = op["f"]
        if f in HEALS or (f not in HEAL_FS):
            window = {"f": f, "label": label(f, op["value"]), "start_s": _s(op["time"]), "stop_s": None,
                      "start_index": op["op"], "stop_index": None, "value": op["value"],
                      "_start": op["time"], "_stop": None}
            result.append(window)
            if f in HEALS:
                open_windows.append(window)
            else:  # a one-off action we know no heal for: a point in time
                window["stop_s"], window["stop_index"], window["_stop"] = window["start_s"], op["op"], op["time"]
            continue
        healed_nodes = set(_nodes(op["value"]))
        for window in [w for w in open_windows if HEALS[w["f"]] == f]:
            nodes = set(_nodes(window["value"]))
            if healed_nodes and nodes and not (healed_nodes & nodes):
                continue
            window["stop_s"], window["stop_index"], window["_stop"] = _s(op["time"]), op["op"], op["time"]
            open_windows.remove(window)
    return result


def active(windows_: list[dict], time_ns) -> list[str]:
    """Labels of the faults active at `time_ns` (ns since the test started)."""
    if time_ns is None:
        return []
    return [w["label"] for w in windows_
            if w["_start"] is not None and w["_start"] <= time_ns
            and (w["_stop"] is None or time_ns <= w["_stop"])]


def public(windows_: list[dict]) -> list[dict]:
    """The windows as results.json `nemesis` (without private fields)."""
    return [{k: v for k, v in w.items() if not k.startswith("_")} for w in windows_]


def _s(time_ns):
    return None if time_ns is None else round(time_ns / 1e9, 6)
