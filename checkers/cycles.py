"""G0 and G1c cycles (plain, -process, -realtime; G1c split into wr-only and ww-needing).

Why it is shaped this way: the dependency graph of a long run has millions
of nodes, and the driver must never hold the whole history, but only ops in
a strongly connected component can be in a cycle. So the graph is cut down
where it lives, and only what may lie on a cycle reaches the driver:

1. Nodes are ops that must have happened (docs/ANOMALIES.md), except that a
   non-transactional op with several sends is one node per send. Node id =
   ``op * NODE_SHIFT + sub`` (sub 0: the whole op, sub i+1: its send mop i).
2. Edges (kind bitmask): ww = writer of a value -> writer of the next value
   of the key in log order; wr = writer -> every `ok` op that read the value;
   process = consecutive graph ops of one process; realtime = A completed
   `ok` before B was invoked (an `info` op never completes in this sense:
   its writes may land later), transitively reduced. Process and realtime
   edges of an op of several nodes leave from an out hub and arrive at an in
   hub (sub ids NODE_SHIFT-1, -2) joined to its nodes by HUB legs; reported
   cycles fold the hubs away. Plain G0/G1c use compressed data edges: a
   writer of one record that reads nothing sits on its key's chain between
   its neighbours and nothing else, so each chain is compressed to edges
   between junctions (ops of two records or more, ops that read and write,
   and plain writers whose path would otherwise fold back into the junction
   it left).
3. The cover filter. Every node has a time phi inside its op's interval
   (commit call of a txn, completion of a reader, invoke of a plain writer),
   doubled so hubs fit between. Along a cycle phi must come back down, and
   every value it passes is spanned by an edge that strictly decreases phi
   (or, on a cycle of one phi, by an edge that keeps it) ; realtime and hub
   edges always increase it, and process edges do unless two ops of a
   process touch within a nanosecond. So the spans of the non-increasing ww,
   wr (and then process) edges cover every node of every cycle. The per-key
   pass computes those spans while it builds the log (merged per task); a
   valid run's wr-only families have none, and then nothing more is done.
4. Where spans exist, a second per-key pass keeps only the edges whose two
   ends lie in the spans. It reads only the keys whose rows' times may
   reach into a span (a node's phi is one of its row's times): the main
   pass left, per key, a bitmap of the bins of the run its rows reach into,
   and the driver tests those against the spans' bins, with no scan of the
   table. It also names the processes whose ops reach into the widest
   interval set. The op table then gives the process order and ports of
   the graph ops with a covered port (a sort within the table's
   partitions, whose route is the process, of only those processes; one
   collect for the widest interval set serves the narrower one), and the
   driver adds the realtime edges among those (reduced among them: within a component the
   same edges as among all ops), trims sources and sinks, and searches: an iterative
   Tarjan SCC on the subgraph each anomaly allows, then a BFS over (node,
   kinds-seen) for the shortest closed walk through the SCC that uses every
   kind the anomaly requires. One instance per SCC. A graph whose edges of
   all its anomalies' kinds together close no cycle is not searched at all
   (`has_cycle`).
5. A graph still above ``edge_cap`` edges after trimming (or whose covered
   part is too big to bring to the driver) is reported as not checked, in
   one `cycle-search-incomplete` row (or the permitted variant when only
   always-permitted families were skipped), never a blown driver.

Anomalies (allowed kinds / required kinds): G0 ww/ww; G1c wr/wr (bad);
G1c-ww ww+wr/ww+wr (permitted); -process adds process to both; -realtime
allows process+realtime and requires realtime.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import allowed, passes
from checkers.anomaly import ANOMALY_SCHEMA, empty_anomalies
from checkers.arrays import NULL, bitmaps, covered, merge_intervals
from checkers.fetch import fetch_rows
from checkers.history_format import NEMESIS, OK, TXN
from checkers.keypass import (
    COVER,
    EDGE,
    HUB,
    I_ALL,
    I_C,
    I_CWR,
    I_WR,
    INFO_NODE,
    NO_TIME,
    NODE_SHIFT,
    PROC,
    ROUTE,
    RT,
    S_CWR,
    S_CWW,
    S_WR,
    S_WW,
    SPAN,
    WR,
    WW,
    Params,
    cover_bin,
)
from checkers.load import Tables, free_rows, known_keys, stored_rows
from checkers.routes import route_partitions, rows_in_partitions, rows_of_routes
from checkers.spark import broadcast_if_small, where_in
from checkers.table_format import OP_ROW, pid_route

OUT_HUB, IN_HUB = NODE_SHIFT - 1, NODE_SHIFT - 2  # sub-ids of an op's hub nodes
EDGE_CAP = 500_000
# At most this many covered graph ops or edges are brought to the driver.
DRIVER_OPS = 1_000_000
DRIVER_EDGES = 2_000_000
# Up to this many intervals a row is tested against them in SQL; above, by
# numpy's sorted search in a Python worker. SQL has no sorted search: the
# lookup in an array this replaced ran an interpreted lambda over every
# interval for each row, and on the demo's 6,782 events (865 intervals) made
# the cycle search take 8 s.
SQL_INTERVALS = 32


@dataclass(frozen=True)
class CycleKind:
    name: str
    allowed: int
    required: int


VARIANTS = {
    "data": [CycleKind("G0", WW, WW), CycleKind("G1c", WR, WR), CycleKind("G1c-ww", WW | WR, WW | WR)],
    "process": [
        CycleKind("G0-process", WW | PROC, WW | PROC),
        CycleKind("G1c-process", WR | PROC, WR | PROC),
        CycleKind("G1c-ww-process", WW | WR | PROC, WW | WR | PROC),
    ],
    "realtime": [
        CycleKind("G0-realtime", WW | PROC | RT, WW | RT),
        CycleKind("G1c-realtime", WR | PROC | RT, WR | RT),
        CycleKind("G1c-ww-realtime", WW | WR | PROC | RT, WW | WR | RT),
    ],
}
BY_NAME = {kind.name: kind for kinds in VARIANTS.values() for kind in kinds}

# graph: (anomalies, the covered data edges it takes, with process edges?, with realtime edges?)
FAMILIES = {
    "data-wr": (["G1c"], I_CWR, False, False),
    "data": (["G0", "G1c-ww"], I_C, False, False),
    "process-wr": (["G1c-process"], I_WR, True, False),
    "process": (["G0-process", "G1c-ww-process"], I_ALL, True, False),
    "realtime-wr": (["G1c-realtime"], I_WR, True, True),
    "realtime": (["G0-realtime", "G1c-ww-realtime"], I_ALL, True, True),
}
# Which spans make up each interval set.
SPANS_OF = {I_CWR: (S_CWR,), I_C: (S_CWR, S_CWW), I_WR: (S_WR, "process"), I_ALL: (S_WR, "process", S_WW)}


def find(t: Tables, edge_cap: int = EDGE_CAP) -> DataFrame:
    """Every G0/G1c cycle family, one row per strongly connected region that shows it."""
    rows = cycle_rows(t, edge_cap)
    if not rows:
        return empty_anomalies(t.spark)
    return t.spark.createDataFrame(rows, ANOMALY_SCHEMA)


def cycle_rows(t: Tables, edge_cap: int = EDGE_CAP) -> list[tuple]:
    """The anomaly rows (ANOMALY_SCHEMA tuples) of every cycle family."""
    intervals = _intervals(t)
    if not intervals:
        return []
    graphs, times = _graphs(t, intervals)
    rows = []
    for family, (names, *_rest) in FAMILIES.items():
        graph = graphs.get(family)
        if graph is None:
            continue
        kinds = [BY_NAME[name] for name in names]
        if isinstance(graph, str):
            rows.append(_skipped(t, kinds, f"{'/'.join(names)} not checked: {graph}"))
            continue
        graph = _dedupe(graph)
        if len(graph) > edge_cap:
            graph = trim(graph)
        if len(graph) > edge_cap:
            rows.append(
                _skipped(
                    t,
                    kinds,
                    f"{'/'.join(names)} not checked: {len(graph)} edges remain after "
                    f"trimming, above the cap of {edge_cap}",
                )
            )
            continue
        if not has_cycle(graph, _union(kind.allowed for kind in kinds)):
            continue  # a cycle any of these kinds allows is a cycle of their union
        for kind in kinds:
            for walk in map(without_hubs, search(graph, kind.allowed, kind.required)):
                rows.append((kind.name, _first_key(walk), [node // NODE_SHIFT for node, _, _ in walk], describe(walk)))
    found = sorted({op for row in rows if len(row) == 4 for op in row[2]})
    when = {op: times[op] for op in found if op in times}
    missing = [op for op in found if op not in when]
    if missing:
        when.update(_op_times(t, missing))
    out = []
    for row in rows:
        if len(row) != 4:
            out.append(row)
            continue
        name, key, ops, cycle = row
        out.append(
            (name, key, None, None, None, None, ops, max((when.get(op) or 0 for op in ops), default=None), cycle)
        )
    return out


def _skipped(t: Tables, kinds, why: str) -> tuple:
    bad_skipped = any(not allowed.allowed(kind.name, t.test) for kind in kinds)
    name = "cycle-search-incomplete" if bad_skipped else allowed.SKIPPED_PERMITTED
    return (name, None, None, None, None, None, [], None, why)


# ---------------------------------------------------------------- spans


def _intervals(t: Tables) -> dict:
    """Merged spans per interval set (only the non-empty ones)."""
    spans: dict = {}
    for row in passes.small(t).get(SPAN, []):
        spans.setdefault(row["a"], []).append((row["b"], row["c"]))
    if t.metrics.get("tight"):
        spans["process"] = _process_spans(t)
    result = {}
    for interval_set, parts in SPANS_OF.items():
        pairs = [pair for part in parts for pair in spans.get(part, [])]
        if pairs:
            lo, hi = merge_intervals(
                np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)
            )
            result[interval_set] = (lo, hi)
    return result


def _process_spans(t: Tables) -> list[tuple]:
    """Spans of non-increasing process edges: only where two successive ops of
    a process touch within a nanosecond (the load counts those)."""
    ops = _graph_ops(t)
    back = ops.where(F.col("prev_out").isNotNull() & (F.col("in_phi") <= F.col("prev_out_phi")))
    return [(r["in_phi"], r["prev_out_phi"]) for r in fetch_rows(back.select("in_phi", "prev_out_phi"))]


# ---------------------------------------------------------------- the covered graphs


def _graphs(t: Tables, intervals: dict) -> tuple[dict, dict]:
    """(family -> list of (src, dst, kind, key) edges, or why it was not built;
    op -> its time, for the covered ops brought to the driver)."""
    # The graph ops' plan does not depend on the cycle pass: it is built on a
    # thread of its own while the pass's job runs, if a process order needs it.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gregor-ports") as pool:
        # Not when the covered ops will read their processes' partitions alone (checkers/routes.py).
        by_process = I_WR in intervals or I_ALL in intervals
        planned = pool.submit(_graph_op_ports, t) if by_process and route_partitions(t.rows) is None else None
        counts, too_big, rows, routes = _cycle_pass(t, intervals)
        ports = planned.result() if planned else None
    data: dict = {}
    nodes: dict = {}
    for r in rows:
        if r["tag"] == EDGE:
            data.setdefault(r["d"], []).append((r["a"], r["b"], r["c"], r["key"]))
        else:
            nodes.setdefault(r["d"], []).append((r["a"], r["b"], r["c"]))
    ordering = {}
    ordered = [s for s in (I_WR, I_ALL) if s in intervals and s not in too_big]
    # The widest set's routes serve a narrower one: whole processes are
    # taken, and each set's own cover filter is applied to their ops.
    wide = _covered_ops(t, intervals[ordered[-1]], routes, ports) if ordered else None
    times = {}
    for interval_set in ordered:
        ops = wide
        if isinstance(ops, str) and interval_set != ordered[-1]:
            ops = _covered_ops(t, intervals[interval_set], routes, ports)
        if not isinstance(ops, str) and (ops is not wide or interval_set == ordered[-1]):
            times.update((r["op"], r["complete_time"] or r["invoke_time"]) for r in ops)  # once per collect
        ordering[interval_set] = (
            ops if isinstance(ops, str) else _order_edges(ops, intervals[interval_set], nodes.get(interval_set, []))
        )
    graphs = {}
    for family, (_, interval_set, with_process, with_realtime) in FAMILIES.items():
        if interval_set not in intervals:
            continue
        if interval_set in too_big:
            graphs[family] = f"{counts[(EDGE, interval_set)]} edges remain after the cover filter, above {DRIVER_EDGES}"
            continue
        edges = list(data.get(interval_set, []))
        if with_process:
            order = ordering[interval_set]
            if isinstance(order, str):
                graphs[family] = order
                continue
            edges += order["process"] + order["legs"]
            if with_realtime:
                edges += order["realtime"]
        graphs[family] = edges
    return graphs, times


def _cycle_pass(t: Tables, intervals: dict) -> tuple[dict, set, list, list[int]]:
    """The cycle pass over the keys near a span: its row count per (tag,
    interval set), the interval sets with too many edges for the driver,
    the edge and node rows of the others, and the routes of the processes
    whose ops reach into the widest set of the process order (I_ALL's spans
    include I_WR's, so one collect of covered ops serves both)."""
    widest = [s for s in (I_WR, I_ALL) if s in intervals][-1:]
    params = Params(
        mode="cycles",
        read_txns=passes.main_params(t).read_txns,
        intervals=intervals,
        wide=intervals[widest[0]] if widest else None,
    )
    out = stored_rows(passes.key_pass(t, params, keys=_near_keys(t, intervals)), t.storage)
    try:
        counts = {(r["tag"], r["d"]): r["count"] for r in out.groupBy("tag", "d").count().collect()}
        too_big = {family for (tag, family), n in counts.items() if tag == EDGE and n > DRIVER_EDGES}
        wanted = [family for family in intervals if family not in too_big]
        rows = (
            fetch_rows(
                out.where(F.col("d").isin(wanted) | (F.col("tag") == ROUTE)).select("tag", "key", "a", "b", "c", "d")
            )
            if wanted
            else []
        )
    finally:
        free_rows(out)
    routes = sorted({pid_route(r["a"]) for r in rows if r["tag"] == ROUTE})
    return counts, too_big, [r for r in rows if r["tag"] != ROUTE], routes


def _near_keys(t: Tables, intervals: dict) -> list[int] | None:
    """The keys whose cover (the main pass's bitmap of the bins of the run
    their rows' times reach into) meets a bin of a span of any interval set;
    None when that is every key. Among them is every key with a row whose
    op's times reach into a span, which is all the cycle pass needs: a
    node's phi is its row's invoke, completion or clamped commit time, so no
    node of another key lies in a span, and the pass, which keeps only edges
    and nodes in spans, would find nothing there. No scan of the table: the
    covers came back with the main pass's small rows."""
    cover = passes.main_params(t).cover
    covers = passes.small(t).get(COVER, [])
    if cover is None or not covers:
        return None
    spans = merge_intervals(
        np.concatenate([pair[0] for pair in intervals.values()]),
        np.concatenate([pair[1] for pair in intervals.values()]),
    )
    lo, hi = (cover_bin(bound, cover) for bound in spans)
    span_bins = bitmaps(np.zeros(len(lo), np.int64), lo, hi, 1, cover[2])[0]
    near = sorted(r["key"] for r in covers if (np.asarray(r["values"], np.int64) & span_bins).any())
    return None if len(near) >= len(known_keys(t.test)) else near


def _graph_ops(t: Tables, routes: list[int] | None = None, ports: DataFrame | None = None) -> DataFrame:
    """Per graph op: process, times, in and out ports with their doubled phi, and
    the out port of the process's previous graph op (of these routes only, if given).
    `ports`: `_graph_op_ports(t)` if already built (`_graphs` builds it only
    when the table cannot be read a few routes at a time)."""
    if routes is not None and ports is None:
        graph = _graph_op_ports(t, rows_of_routes(t.rows, routes))  # their partitions only, where it can
    else:
        graph = _graph_op_ports(t) if ports is None else ports
        if routes is not None:
            graph = graph.where(F.col("route").isin(routes))
    # An op row's route is its process's (checkers/load.py), and the table is
    # already partitioned by route: no shuffle, only a sort within partitions
    # (a few routes' partitions, read alone, shuffle their few rows).
    w = Window.partitionBy("route").orderBy("invoke_index")
    return graph.select(
        "*", F.lag("out_port").over(w).alias("prev_out"), F.lag("out_phi").over(w).alias("prev_out_phi")
    )


def _graph_op_ports(t: Tables, rows: DataFrame | None = None) -> DataFrame:
    """Per graph op: process, times, in and out ports with their doubled phi
    (of `rows`, a part of the table, if given)."""
    rows = rows_in_partitions(t.rows, t.metrics["op_partitions"]) if rows is None else rows
    ops = rows.where((F.col("kind") == OP_ROW) & (F.col("process") != NEMESIS))
    ops, ports = _with_ports(t, ops)
    return ops.where(ports["graph_op"]).select(
        "op",
        "route",
        "pid",
        "process",
        "type",
        "invoke_index",
        "invoke_time",
        "complete_time",
        *[ports[name].alias(name) for name in ("in_port", "in_phi", "out_port", "out_phi", "multi")],
    )


def _with_ports(t: Tables, ops: DataFrame) -> tuple[DataFrame, dict]:
    """`ops` with what an `info` op must have sent joined on, and the
    expressions of an op row's graph node(s): whether it is a graph op at all
    (it must have sent something, or it read), its in and out ports, their
    doubled phi, and whether it has a hub."""
    info = _info_nodes(t)
    if info:
        info_df = t.spark.createDataFrame(
            [(op, len(m), min(m)) for op, m in info.items()], "op long, info_must long, info_mop long"
        )
        ops = ops.join(broadcast_if_small(info_df, len(info)), "op", "left")
    else:
        ops = ops.withColumn("info_must", F.lit(None).cast("long")).withColumn("info_mop", F.lit(None).cast("long"))
    ok = F.col("type") == OK
    reader = ok & F.coalesce(F.col("reads"), F.lit(False))
    n_must = F.when(ok, F.col("n_sends")).otherwise(F.coalesce(F.col("info_must"), F.lit(0)))
    per_send = (F.col("f") != TXN) & (F.col("n_sends") >= 2)
    start, end = F.col("invoke_time"), F.coalesce(F.col("complete_time"), F.lit(NO_TIME))
    committed = F.least(F.greatest(F.col("commit_time"), start), end)
    w_phi = F.when(F.col("commit_time").isNotNull(), committed).otherwise(start)
    r_phi = F.when(F.col("commit_time").isNotNull(), committed).otherwise(F.coalesce(F.col("complete_time"), start))
    n_nodes = F.when(per_send, n_must + reader.cast("long")).otherwise(F.lit(1))
    multi = n_nodes >= 2
    base = F.col("op") * NODE_SHIFT
    single = F.when(per_send & ~reader, base + F.coalesce(F.col("info_mop"), F.lit(0)) + 1).otherwise(base)
    single_phi = 2 * F.when(per_send | ~reader, w_phi).otherwise(r_phi)
    top = F.when(reader, r_phi).otherwise(w_phi)
    return ops, {
        "graph_op": (n_must > 0) | reader,
        "in_port": F.when(multi, base + IN_HUB).otherwise(single),
        "in_phi": F.when(multi, 2 * w_phi - 1).otherwise(single_phi),
        "out_port": F.when(multi, base + OUT_HUB).otherwise(single),
        "out_phi": F.when(multi, 2 * top + 1).otherwise(single_phi),
        "multi": multi,
    }


def _info_nodes(t: Tables) -> dict:
    """op -> mop indices of its sends that must have happened, for `info` ops."""
    nodes: dict = {}
    for row in passes.small(t).get(INFO_NODE, []):
        nodes.setdefault(row["a"], []).append(row["b"])
    return nodes


def _covered_ops(t: Tables, intervals, routes: list[int], ports: DataFrame | None = None) -> list | str:
    """The graph ops with a port inside the intervals, or why they were not
    brought to the driver. `routes`: processes that include every one with
    such an op (from the cycle pass); the process order needs all of their graph ops."""
    if not routes:
        return []
    ops = _graph_ops(t, routes, ports)
    if len(intervals[0]) <= SQL_INTERVALS:
        ops = ops.where(_inside(intervals, F.col("in_phi"), F.col("out_phi")))
    else:
        ops = ops.mapInArrow(_inside_in_python(intervals, "in_phi", "out_phi"), ops.schema)
    rows = fetch_rows(ops.limit(DRIVER_OPS + 1))
    if len(rows) > DRIVER_OPS:
        return f"more than {DRIVER_OPS} ops remain after the cover filter"
    return rows


def _inside(intervals, *phis: F.Column) -> F.Column:
    """One of these phis lies in one of the intervals (a few of them: SQL_INTERVALS)."""
    lo, hi = _as_lists(intervals)
    condition = F.lit(False)
    for phi in phis:
        condition = condition | _covered_column(phi, lo, hi)
    return condition


def _inside_in_python(intervals, *names: str):
    """A mapInArrow function keeping the rows with one of these columns in
    one of the intervals (nulls never are), by numpy's sorted search."""

    def run(batches):
        for batch in batches:
            keep = np.zeros(batch.num_rows, dtype=bool)
            for name in names:
                values = pc.fill_null(batch.column(name), NULL).to_numpy()
                keep |= covered(values, *intervals)
            if keep.any():
                yield batch.filter(pa.array(keep))

    return run


def _as_lists(intervals) -> tuple[list, list]:
    return [int(x) for x in intervals[0]], [int(x) for x in intervals[1]]


def _order_edges(candidates: list, intervals, covered_nodes) -> dict:
    """Process, hub and realtime edges between covered ports and nodes
    (candidates: _covered_ops of these intervals or of wider ones)."""
    lo, hi = intervals
    phis = np.array(
        sorted({phi for r in candidates for phi in (r["in_phi"], r["out_phi"], r["prev_out_phi"]) if phi is not None}),
        np.int64,
    )
    inside = set(phis[covered(phis, lo, hi)].tolist())

    def ok_phi(phi):
        return phi in inside

    rows = [r for r in candidates if ok_phi(r["in_phi"]) or ok_phi(r["out_phi"])]
    process, legs = [], []
    ports, info = {}, {}
    for r in rows:
        ports[r["op"]] = (r["out_port"], r["in_port"])
        info[r["op"]] = {
            "op": r["op"],
            "process": r["process"],
            "type": r["type"],
            "invoke_time": r["invoke_time"],
            "complete_time": r["complete_time"],
        }
        if r["prev_out"] is not None and ok_phi(r["in_phi"]) and ok_phi(r["prev_out_phi"]):
            process.append((r["prev_out"], r["in_port"], PROC, None))
    phi_of = {}
    for r in rows:
        phi_of[r["in_port"]], phi_of[r["out_port"]] = r["in_phi"], r["out_phi"]
    multi = {r["op"] for r in rows if r["multi"]}
    for node, op, _phi in covered_nodes:
        if op in multi:
            out, into = ports[op]
            if ok_phi(phi_of[out]):
                legs.append((node, out, HUB, None))
            if ok_phi(phi_of[into]):
                legs.append((into, node, HUB, None))
    realtime = [e for e in realtime_edges(info, ports) if ok_phi(phi_of[e[0]]) and ok_phi(phi_of[e[1]])]
    return {"process": process, "legs": legs, "realtime": realtime}


def _covered_column(phi: F.Column, lo: list, hi: list) -> F.Column:
    """phi lies in one of the intervals."""
    return _meets_column(phi, phi, lo, hi)


def _meets_column(start: F.Column, end: F.Column, lo: list, hi: list) -> F.Column:
    """[start, end] meets one of the sorted disjoint intervals: one comparison
    per interval, so only for a few of them (SQL_INTERVALS; more go through
    numpy in a Python worker)."""
    condition = F.lit(False)
    for a, b in zip(lo, hi):
        condition = condition | ((start <= b) & (end >= a))
    return condition


def realtime_edges(info: dict, ports: dict) -> list[tuple]:
    """Transitive reduction of "A completed `ok` before B was invoked" among these ops of different processes.

    With ops sorted by (invoke time, op), A's targets are the ops invoked after
    A completed and no later than the earliest completion among those.
    """
    ordered = sorted(info.values(), key=lambda r: (r["invoke_time"], r["op"]))
    invokes = [r["invoke_time"] for r in ordered]
    over = {r["op"]: r["complete_time"] if r["type"] == OK else None for r in ordered}
    suffix_min = [NO_TIME] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        ct = over[ordered[i]["op"]]
        suffix_min[i] = min(suffix_min[i + 1], NO_TIME if ct is None else ct)
    edges = []
    for a in ordered:
        if over[a["op"]] is None:
            continue
        lo = bisect_right(invokes, over[a["op"]])
        bound = suffix_min[lo]
        if bound >= NO_TIME:
            continue
        hi = bisect_right(invokes, bound)
        for b in ordered[lo:hi]:
            if b["process"] != a["process"]:
                edges.append((ports[a["op"]][0], ports[b["op"]][1], RT, None))
    return edges


def _op_times(t: Tables, ops: list[int]) -> dict:
    """When each op happened (completion, or invoke when cut short)."""
    chosen = where_in(t.ops, "op", ops)
    return {
        r["op"]: r["complete_time"] or r["invoke_time"]
        for r in chosen.select("op", "complete_time", "invoke_time").collect()
    }


def _dedupe(edges):
    """One edge per (src, dst, kind), with the smallest key; no self-loops."""
    best = {}
    for src, dst, kind, key in edges:
        if src == dst:
            continue
        k = (src, dst, kind)
        if k not in best or (key is not None and (best[k] is None or key < best[k])):
            best[k] = key
    return [(src, dst, kind, key) for (src, dst, kind), key in best.items()]


def trim(edges):
    """Drops edges whose source has no in-edge or whose target has no out-edge, until none is left to drop."""
    while True:
        has_in = {e[1] for e in edges}
        has_out = {e[0] for e in edges}
        kept = [e for e in edges if e[0] in has_in and e[1] in has_out]
        if len(kept) == len(edges):
            return kept
        edges = kept


# ---------------------------------------------------------------- the search (driver side)


def strongly_connected(adjacency: dict) -> list[list]:
    """Iterative Tarjan: the SCCs of ``{node: [(next, ...), ...]}`` (no recursion limit)."""
    index_of, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for root in adjacency:
        if root in index_of:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index_of[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = adjacency.get(node, ())
            recursed = False
            while i < len(successors):
                nxt = successors[i][0]
                i += 1
                if nxt not in index_of:
                    work.append((node, i))
                    work.append((nxt, 0))
                    recursed = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index_of[nxt])
            if recursed:
                continue
            if low[node] == index_of[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                result.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return result


def has_cycle(graph: list[tuple], allowed: int) -> bool:
    """Whether the edges of ``allowed`` kinds (and hub legs) close any cycle.

    Cheaper than `search` (no sort, no walks), and most covered graphs of a
    valid run have none: then no search of a kind within ``allowed`` runs.
    """
    return any(len(component) >= 2 for component in strongly_connected(_adjacency(graph, allowed)))


def _adjacency(edges, allowed: int) -> dict:
    """``{node: [(next, kind, key), ...]}`` over the edges of ``allowed``
    kinds and hub legs, in the edges' order; every endpoint is a node."""
    adjacency: dict = {}
    for src, dst, kind, key in edges:
        if kind & ~(allowed | HUB) == 0:
            adjacency.setdefault(src, []).append((dst, kind, key))
            adjacency.setdefault(dst, [])
    return adjacency


def _union(masks) -> int:
    union = 0
    for mask in masks:
        union |= mask
    return union


def search(graph: list[tuple], allowed: int, required: int) -> list[list[tuple]]:
    """Shortest closed walks using only ``allowed`` kinds and every ``required`` kind, one per SCC.

    ``graph`` is a list of (src, dst, kind, key). A walk is a list of
    (node, kind, key): the node and the edge leaving it.
    """
    adjacency = _adjacency(sorted(graph, key=lambda e: (e[0], e[1], e[2])), allowed)
    walks = []
    for component in strongly_connected(adjacency):
        if len(component) < 2:
            continue
        members = set(component)
        inside = [(src, dst, kind, key) for src in component for dst, kind, key in adjacency[src] if dst in members]
        seen = 0
        for _, _, kind, _ in inside:
            seen |= kind
        if seen & required != required:
            continue
        walk = _closed_walk(adjacency, members, inside, required)
        if walk:
            walks.append(walk)
    return walks


def _closed_walk(adjacency: dict, members: set, inside: list, required: int):
    """BFS over (node, required kinds seen) from an edge of the rarest required kind back to its source."""
    counts = {bit: sum(1 for e in inside if e[2] & bit) for bit in (WW, WR, PROC, RT) if required & bit}
    rarest = min(counts, key=counts.get)
    start_src, start_dst, start_kind, start_key = next(e for e in inside if e[2] & rarest)
    start_state = (start_dst, start_kind & required)
    parent = {start_state: None}
    queue = deque([start_state])
    while queue:
        state = queue.popleft()
        node, flags = state
        if node == start_src and flags == required:
            steps = []
            while parent[state] is not None:
                prev_state, kind, key = parent[state]
                steps.append((prev_state[0], kind, key))
                state = prev_state
            steps.reverse()
            return [(start_src, start_kind, start_key)] + steps
        for nxt, kind, key in adjacency[node]:
            if nxt not in members:
                continue
            nstate = (nxt, flags | (kind & required))
            if nstate not in parent:
                parent[nstate] = (state, kind, key)
                queue.append(nstate)
    return None


def _is_hub(node: int) -> bool:
    return node % NODE_SHIFT in (OUT_HUB, IN_HUB)


def without_hubs(walk: list[tuple]) -> list[tuple]:
    """The walk over real nodes only: each hub hop folds into the edge that
    left the real node before it (x -leg-> hub -realtime-> y is x -realtime-> y)."""
    if not any(_is_hub(node) for node, _, _ in walk):
        return walk
    first = next(i for i, (node, _, _) in enumerate(walk) if not _is_hub(node))
    out: list[tuple] = []
    for node, kind, key in walk[first:] + walk[:first]:
        if not _is_hub(node):
            out.append((node, kind, key))
        elif kind != HUB:
            out[-1] = (out[-1][0], kind, key)
    return out


def _node_label(node: int) -> str:
    op, sub = divmod(node, NODE_SHIFT)
    return f"op {op}" if sub == 0 else f"op {op} send {sub - 1}"


def _edge_label(kind: int, key) -> str:
    if kind & PROC:
        return "process"
    if kind & RT:
        return "realtime"
    name = {WW: "ww", WR: "wr", WW | WR: "ww..wr"}[kind]
    return f"{name}(key {key})"


def describe(walk: list[tuple]) -> str:
    """'op 12 -ww(key 3)-> op 40 -wr(key 1)-> op 12'."""
    parts = []
    for node, kind, key in walk:
        parts.append(f"{_node_label(node)} -{_edge_label(kind, key)}->")
    parts.append(_node_label(walk[0][0]))
    return " ".join(parts)


def _first_key(walk: list[tuple]):
    return next((key for _, kind, key in walk if key is not None), None)
