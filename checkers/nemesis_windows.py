"""Fault windows from the nemesis ops, and which faults were active at a given time.

Nemesis ops are a few per minute of run, so they come back to the driver
(a small residue, never the history). A window runs from the `info`
completion of a fault's start op to that of its heal op (docs/RESULTS.md).
What a fault acts on is read from the fields docs/HISTORY.md fixes for
every nemesis value: `nodes` (node names) and `clients` (history process
ids). A history recorded before those fields existed names nodes only in
its explicit legacy fields (isolated, healed, killed, started, paused,
resumed, cleared), and only those are read then.
"""

from __future__ import annotations

from checkers.history_format import CLIENTS, LEGACY_NODE_FIELDS, NETEM_EMULATED, NODES
from ground.faults import HEAL_FS, HEALS


def nodes_of(value) -> list[str]:
    """Node names a nemesis value acts on: its `nodes`, else its legacy node fields."""
    if not isinstance(value, dict):
        return []
    if NODES in value:
        found = value[NODES] if isinstance(value[NODES], list) else []
        return _unique(n for n in found if isinstance(n, str))
    found = []
    for name in LEGACY_NODE_FIELDS:
        item = value.get(name)
        if isinstance(item, list):
            for entry in item:
                found.extend(entry if isinstance(entry, list) else [entry])
    return _unique(n for n in found if isinstance(n, str))


def clients_of(value) -> list[int]:
    """History process ids a nemesis value targets (`clients`: integers; a
    history of the earlier harness lists {"process": id, ...} objects)."""
    if not isinstance(value, dict) or not isinstance(value.get(CLIENTS), list):
        return []
    found = []
    for entry in value[CLIENTS]:
        if isinstance(entry, dict):
            entry = entry.get("process")
        if isinstance(entry, int) and not isinstance(entry, bool):
            found.append(entry)
    return _unique(found)


def _unique(items) -> list:
    out: list = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def label(f: str, value) -> str:
    """A short human label: "kill n2", "partition n1 | n2 n3", "pause client 7"."""
    base = f[len("start-") :] if f.startswith("start-") else f
    parts = [base]
    if isinstance(value, dict) and isinstance(value.get("isolated"), list):
        parts.append(
            " | ".join(
                " ".join(str(n) for n in group) if isinstance(group, list) else str(group)
                for group in value["isolated"]
            )
        )
    else:
        parts.extend(nodes_of(value))
    clients = clients_of(value)
    if clients:
        parts.append(("clients " if len(clients) > 1 else "client ") + " ".join(str(c) for c in clients))
    text = " ".join(parts)
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
    shares a node or a client with it (all of its kind when either names none)."""
    result: list[dict] = []
    open_windows: list[dict] = []
    for op in ops:
        f = op["f"]
        if f in HEALS or (f not in HEAL_FS):
            window = {
                "f": f,
                "label": label(f, op["value"]),
                "start_s": _s(op["time"]),
                "stop_s": None,
                "start_index": op["op"],
                "stop_index": None,
                "value": op["value"],
                "_start": op["time"],
                "_stop": None,
            }
            result.append(window)
            if f in HEALS:
                open_windows.append(window)
            else:  # a one-off action we know no heal for: a point in time
                window["stop_s"], window["stop_index"], window["_stop"] = window["start_s"], op["op"], op["time"]
            continue
        healed = _targets(op["value"])
        for window in [w for w in open_windows if HEALS[w["f"]] == f]:
            targets = _targets(window["value"])
            if healed and targets and not (healed & targets):
                continue
            window["stop_s"], window["stop_index"], window["_stop"] = _s(op["time"]), op["op"], op["time"]
            open_windows.remove(window)
    return result


def _targets(value) -> set:
    return {("node", n) for n in nodes_of(value)} | {("client", c) for c in clients_of(value)}


def active(windows_: list[dict], time_ns) -> list[str]:
    """Labels of the faults active at `time_ns` (ns since the test started)."""
    if time_ns is None:
        return []
    return [
        w["label"]
        for w in windows_
        if w["_start"] is not None and w["_start"] <= time_ns and (w["_stop"] is None or time_ns <= w["_stop"])
    ]


def public(windows_: list[dict]) -> list[dict]:
    """The windows as results.json `nemesis` (without private fields)."""
    return [{k: v for k, v in w.items() if not k.startswith("_")} for w in windows_]


def _s(time_ns):
    return None if time_ns is None else round(time_ns / 1e9, 6)
