"""A plain reading of the cycle definitions of docs/ANOMALIES.md, for tests.

No compression, no cover filter, no transitive reduction, no Spark: the
whole dependency graph of a small history, its strongly connected
components, and one cycle instance per component that holds every edge
kind the anomaly requires. The checker's graph is cut down in several
ways; on any history both must count the same instances.

Only histories whose ops each make one node (transactions and single-send
ops) are read here; ops of several sends are covered by scenario tests.
"""

from __future__ import annotations

import random

WW, WR, PROC, RT = 1, 2, 4, 8
KINDS = {
    "G0": (WW, WW),
    "G1c": (WR, WR),
    "G1c-ww": (WW | WR, WW | WR),
    "G0-process": (WW | PROC, WW | PROC),
    "G1c-process": (WR | PROC, WR | PROC),
    "G1c-ww-process": (WW | WR | PROC, WW | WR | PROC),
    "G0-realtime": (WW | PROC | RT, WW | RT),
    "G1c-realtime": (WR | PROC | RT, WR | RT),
    "G1c-ww-realtime": (WW | WR | PROC | RT, WW | WR | RT),
}


def _ops(events):
    ops, pending = {}, {}
    for e in events:
        if e["type"] == "invoke":
            pending[e["process"]] = e
            continue
        invoke = pending.pop(e["process"])
        ops[e["index"]] = {
            "op": e["index"],
            "process": e["process"],
            "type": e["type"],
            "f": e["f"],
            "invoke": invoke["time"],
            "complete": e["time"],
            "invoke_index": invoke["index"],
            "mops": e.get("mops", []),
        }
    for invoke in pending.values():  # cut short: info
        ops[invoke["index"]] = {
            "op": invoke["index"],
            "process": invoke["process"],
            "type": "info",
            "f": invoke["f"],
            "invoke": invoke["time"],
            "complete": None,
            "invoke_index": invoke["index"],
            "mops": invoke.get("mops", []),
        }
    return ops


def graph(events) -> dict:
    """node (op id) -> set of (next node, kind)."""
    ops = _ops(events)
    read = {
        (m["key"], m["value"])
        for o in ops.values()
        if o["type"] == "ok"
        for m in o["mops"]
        if m["f"] == "poll" and m.get("key") is not None
    }
    sends = [(o, m) for o in ops.values() for m in o["mops"] if m["f"] == "send"]
    read_txns = {
        o["op"] for o, m in sends if o["type"] == "info" and o["f"] == "txn" and (m["key"], m["value"]) in read
    }
    must = [
        (o, m)
        for o, m in sends
        if o["type"] == "ok" or (o["type"] == "info" and ((m["key"], m["value"]) in read or o["op"] in read_txns))
    ]
    offsets: dict = {}
    for o in ops.values():
        for m in o["mops"]:
            if m["f"] == "poll" and m.get("key") is not None:
                offsets.setdefault(m["key"], set()).add(m["offset"])
    for _, m in must:
        if m.get("offset") is not None:
            offsets.setdefault(m["key"], set()).add(m["offset"])
    index = {k: {off: i for i, off in enumerate(sorted(v))} for k, v in offsets.items()}
    position: dict = {}
    must_mops = {id(m) for _, m in must}
    for o in ops.values():
        for m in o["mops"]:
            if m.get("offset") is not None and (m["f"] == "poll" or id(m) in must_mops):
                at = index[m["key"]][m["offset"]]
                kv = (m["key"], m["value"])
                position[kv] = min(position.get(kv, at), at)
    edges: dict = {}

    def add(a, b, kind):
        if a != b:
            edges.setdefault(a, set()).add((b, kind))

    chains: dict = {}
    writers: dict = {}
    for o, m in must:
        writers.setdefault((m["key"], m["value"]), []).append(o["op"])
        if (m["key"], m["value"]) in position:
            chains.setdefault(m["key"], []).append((position[(m["key"], m["value"])], o["op"]))
    for chain in chains.values():
        chain.sort()
        for (_, a), (_, b) in zip(chain, chain[1:]):
            add(a, b, WW)
    readers = set()
    for o in ops.values():
        if o["type"] != "ok":
            continue
        for m in o["mops"]:
            if m["f"] == "poll" and m.get("key") is not None:
                readers.add(o["op"])
                for w in writers.get((m["key"], m["value"]), []):
                    add(w, o["op"], WR)
    nodes = {o["op"] for o, _ in must} | readers
    by_process: dict = {}
    for op in nodes:
        by_process.setdefault(ops[op]["process"], []).append((ops[op]["invoke_index"], op))
    for chain in by_process.values():
        chain.sort()
        for (_, a), (_, b) in zip(chain, chain[1:]):
            add(a, b, PROC)
    for a in nodes:
        if ops[a]["type"] != "ok":
            continue
        for b in nodes:
            if ops[b]["process"] != ops[a]["process"] and ops[a]["complete"] < ops[b]["invoke"]:
                add(a, b, RT)
    return edges


def _sccs(adjacency: dict) -> list[set]:
    """Strongly connected components with two or more nodes (Kosaraju, small graphs)."""
    nodes = set(adjacency) | {b for outs in adjacency.values() for b in outs}
    order, seen = [], set()
    for root in sorted(nodes):
        if root in seen:
            continue
        stack = [(root, iter(sorted(adjacency.get(root, ()))))]
        seen.add(root)
        while stack:
            node, it = stack[-1]
            nxt = next((n for n in it if n not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(adjacency.get(nxt, ())))))
    reverse: dict = {}
    for a, outs in adjacency.items():
        for b in outs:
            reverse.setdefault(b, set()).add(a)
    components, assigned = [], set()
    for root in reversed(order):
        if root in assigned:
            continue
        component, todo = set(), [root]
        assigned.add(root)
        while todo:
            node = todo.pop()
            component.add(node)
            for prev in reverse.get(node, ()):
                if prev not in assigned:
                    assigned.add(prev)
                    todo.append(prev)
        if len(component) >= 2:
            components.append(component)
    return components


def counts(events) -> dict:
    """anomaly name -> number of instances (one per component that shows it)."""
    edges = graph(events)
    found = {}
    for name, (allowed, required) in KINDS.items():
        adjacency = {a: {b for b, kind in outs if kind & allowed == kind} for a, outs in edges.items()}
        n = 0
        for component in _sccs(adjacency):
            seen = 0
            for a in component:
                for b, kind in edges.get(a, ()):
                    if b in component and kind & allowed == kind:
                        seen |= kind
            if seen & required == required:
                n += 1
        if n:
            found[name] = n
    return found


def random_history(seed: int, key_base: int, process_base: int, time_base: int, ops: int = 8, keys: int = 3):
    """Transactions and single sends whose records land in a random order, and
    polls that read random stretches of the logs: cycles of every family.
    Returns (events without index, the time after the last one)."""
    rng = random.Random(seed)
    clock, timeline, busy = time_base, [], {}
    processes = [process_base + i for i in range(3)]
    for _ in range(ops):
        process = rng.choice(processes)
        if process in busy:
            timeline.append(("done", busy.pop(process), clock))
        else:
            kind = rng.choice(["send", "txn", "txn", "poll"])
            sends = (
                []
                if kind == "poll"
                else [
                    {"f": "send", "key": key_base + rng.randrange(keys), "value": rng.randrange(1 << 40)}
                    for _ in range(1 if kind == "send" else rng.randint(1, 2))
                ]
            )
            op = {
                "process": process,
                "f": kind,
                "sends": sends,
                "polls": kind == "poll" or (kind == "txn" and rng.random() < 0.5),
                "type": rng.choices(["ok", "info", "fail"], weights=[8, 1, 1])[0],
            }
            busy[process] = op
            timeline.append(("invoke", op, clock))
        clock += rng.randint(1, 3) * 1000
    for op in busy.values():
        timeline.append(("done", op, clock))
        clock += 1000
    landed: dict = {}
    for _, op, _ in timeline:
        for m in op["sends"]:
            if op["type"] == "ok" or (op["type"] == "info" and rng.random() < 0.5):
                landed.setdefault(m["key"], []).append(m)
    logs = {}
    for key, records in landed.items():
        records = list({id(m): m for m in records}.values())
        rng.shuffle(records)
        logs[key] = [(offset, m["value"]) for offset, m in enumerate(records)]
        for offset, m in enumerate(records):
            m["offset"] = offset
    events = []
    for what, op, at in timeline:
        base = {"time": at, "process": op["process"], "f": op["f"]}
        if op["f"] == "txn":
            base["txn_id"] = f"t{op['process']}"
        sent = [{"f": "send", "key": m["key"], "value": m["value"]} for m in op["sends"]]
        if what == "invoke":
            events.append(dict(base, type="invoke", mops=sent + ([{"f": "poll"}] if op["polls"] else [])))
            continue
        if op["type"] == "ok":
            sent = [dict(m) for m in op["sends"]]
        read = []
        if op["polls"] and logs and op.setdefault("read", rng.random()) < 0.9:
            key = rng.choice(sorted(logs))
            start = rng.randrange(len(logs[key]))
            read = [
                {"f": "poll", "key": key, "offset": o, "value": v}
                for o, v in logs[key][start : start + rng.randint(1, 3)]
            ]
        events.append(dict(base, type=op["type"], mops=sent + read))
    return events, clock
