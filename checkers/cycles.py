"""G0 and G1c cycles (plain, -process, -realtime; G1c split into wr-only and ww-needing).

Why it is shaped this way: the dependency graph of a long run has millions of
nodes, and the driver must never hold the whole history. So every edge is
built in Spark and the graph is shrunk in Spark before anything is collected:

1. Nodes are ops that must have happened (ANOMALIES.md), except that a
   non-transactional op with several sends is one node per send. Node id =
   ``op * NODE_SHIFT + sub`` (sub 0: the whole op, sub i+1: its send mop i).
2. Edges (kind bitmask): ww = writer of a value -> writer of the next value of
   the key in log order; wr = writer -> every `ok` op that read the value;
   process = consecutive graph ops of one process; realtime = A completed
   `ok` before B was invoked (an `info` op never completes in this sense:
   its writes may land later), transitively reduced: A -> every op invoked after A
   completed but no later than the earliest completion among ops invoked after
   A completed (those are in flight together, so at most the concurrency of
   the run per op, never the quadratic set). Same-process realtime edges are
   dropped: the process chain already orders them. Process and realtime
   edges of an op of several nodes leave from an out hub and arrive at an in
   hub (sub ids NODE_SHIFT-1, -2) joined to its nodes by HUB legs, so two
   10-record sends are linked by one edge, not 100; reported cycles fold the
   hubs away.
3. Plain G0/G1c: a cycle of ww/wr edges only must pass through a *junction*,
   an op that writes two keys or both reads and writes: ops that write one key
   and read nothing only have edges along that key's chain. So each key's
   chain is compressed to junction-to-junction edges (a path through
   non-junction writers becomes one ww edge, or a ww+wr edge when it ends in
   a read), and pure readers, which have no out-edge, vanish.
4. Small runs (at most ``driver_limit`` writes and reads) build the same
   graphs on the driver directly. Bigger runs build them in Spark, with the
   bad wr-only families (G1c, G1c-process, G1c-realtime) in graphs of their
   own without ww edges, and collect a graph as it is when it has at most
   ``edge_cap`` edges. Otherwise it is shrunk in Spark first:
   - cover filter: every op gets a time phi inside its interval (commit call
     of a txn, completion of a reader, invoke of a plain writer) that wr,
     process and realtime edges of a valid history always increase. Along a
     cycle phi must come back down, and every value it passes on the way
     down is spanned by an edge that does not increase phi; nodes outside
     every such span lie on no cycle. One sort and a running maximum.
   - trimming: an edge lies on a cycle only if its source has an in-edge and
     its target an out-edge; iterated (TRIM_ROUNDS at most).
   Both alternate while they remove edges. A valid run's wr-only graphs
   shrink to nothing this way, whatever its length.
5. The residue is collected, or, if it still exceeds ``edge_cap``, the
   graph's anomalies are reported in one `cycle-search-incomplete` row as not
   checked (never a blown driver). The driver runs an iterative Tarjan SCC on
   the subgraph each anomaly allows, then a BFS over (node, kinds-seen) for
   the shortest closed walk through the SCC that uses every kind the anomaly
   requires. One instance per SCC.

Anomalies (allowed kinds / required kinds): G0 ww/ww; G1c wr/wr (bad);
G1c-ww ww+wr/ww+wr (permitted); -process adds process to both; -realtime
allows process+realtime and requires realtime.

Limits: ww edges between concurrent transactions go either way in time
(Kafka orders writes at produce, not commit), so the graphs of the permitted
ww families (G0*, G1c-ww*) of a long busy run may stay above the cap; then
only those are reported as not checked. The realtime edges and the cover
filter use one global sort each (a single Spark task).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import allowed, facts
from checkers.anomaly import ANOMALY_SCHEMA, empty_anomalies
from checkers.load import Tables

NODE_SHIFT = 1 << 20
WW, WR, PROC, RT = 1, 2, 4, 8
# The legs between a multi-node op's nodes and its hubs: always allowed, never required.
HUB = 16
OUT_HUB, IN_HUB = NODE_SHIFT - 1, NODE_SHIFT - 2  # sub-ids of an op's hub nodes
TRIM_ROUNDS = 3
SHRINK_ROUNDS = 2
EDGE_CAP = 500_000
DRIVER_LIMIT = 20_000
# A graph being shrunk continues on the driver below this many edges (same rounds, same result).
DRIVER_SHRINK = 50_000
# The cover filter is a plain filter when its spans merge into this few intervals.
FEW_SPANS = 10_000
FEW_INTERVALS = 32
NO_TIME = 1 << 62

EDGE_SCHEMA = T.StructType([
    T.StructField("src", T.LongType()),
    T.StructField("dst", T.LongType()),
    T.StructField("kind", T.IntegerType()),
    T.StructField("key", T.LongType()),
])


@dataclass(frozen=True)
class CycleKind:
    name: str
    allowed: int
    required: int


VARIANTS = {
    "data": [CycleKind("G0", WW, WW), CycleKind("G1c", WR, WR), CycleKind("G1c-ww", WW | WR, WW | WR)],
    "process": [CycleKind("G0-process", WW | PROC, WW | PROC), CycleKind("G1c-process", WR | PROC, WR | PROC),
                CycleKind("G1c-ww-process", WW | WR | PROC, WW | WR | PROC)],
    "realtime": [CycleKind("G0-realtime", WW | PROC | RT, WW | RT), CycleKind("G1c-realtime", WR | PROC | RT, WR | RT),
                 CycleKind("G1c-ww-realtime", WW | WR | PROC | RT, WW | WR | RT)],
}


def find(t: Tables, edge_cap: int = EDGE_CAP, driver_limit: int = DRIVER_LIMIT) -> DataFrame:
    """Every G0/G1c cycle family, one row per strongly connected region that shows it.

    A graph of at most ``driver_limit`` writes and reads is small enough to
    build on the driver directly; bigger ones are built and trimmed in Spark.
    """
    # Checkpointed first: a big run needs them again, and a limit on the plan itself redoes its joins.
    writers = _writers(t).localCheckpoint(eager=True)
    readers = _readers(t).localCheckpoint(eager=True)
    few_writes = writers.limit(driver_limit + 1).collect()
    few_reads = readers.limit(driver_limit + 1).collect() if len(few_writes) <= driver_limit else None
    if few_reads is not None and len(few_reads) <= driver_limit:
        graph_ops = writers.select("op").unionByName(readers.select("op"))
        graphs, times = _driver_graphs(t, few_writes, few_reads, graph_ops)
    else:
        graphs, times = _spark_graphs(t, writers, readers, edge_cap)
    rows = []
    for kinds, graph in graphs.values():
        if isinstance(graph, str):
            bad_skipped = any(not allowed.allowed(kind.name, t.test) for kind in kinds)
            name = "cycle-search-incomplete" if bad_skipped else allowed.SKIPPED_PERMITTED
            rows.append((name, None, [], graph))
            continue
        for kind in kinds:
            for walk in map(without_hubs, search(graph, kind.allowed, kind.required)):
                rows.append((kind.name, _first_key(walk), [node // NODE_SHIFT for node, _, _ in walk],
                             describe(walk)))
    if not rows:
        return empty_anomalies(t.spark)
    ops = sorted({op for row in rows for op in row[2]})
    when = times(ops)
    return t.spark.createDataFrame(
        [(name, key, None, None, None, None, ops, max((when.get(op) or 0 for op in ops), default=None), cycle)
         for name, key, ops, cycle in rows], ANOMALY_SCHEMA)


def _spark_graphs(t: Tables, writers: DataFrame, readers: DataFrame, edge_cap: int):
    """Per graph: (the anomalies it is searched for, its trimmed edge list or why it was not collected).

    The bad wr-only families get graphs of their own, without ww edges: in a
    valid history those are acyclic along the potential (see _potential), so
    the cover filter empties them, while the permitted ww families may stay
    too big to collect on a long busy run. Every graph is a filter on one
    table of distinct edges that already carries both ends' potential, built
    and counted once: a family costs no shuffle of its own until it is shrunk.
    """
    data = _data_edges(writers, readers)
    nodes = _graph_ops(t, writers, readers).localCheckpoint()
    potential = _potential(nodes, readers).localCheckpoint()
    ports = _ports(nodes).localCheckpoint()
    process = _process_edges(nodes, ports)
    realtime = _realtime_edges(nodes, ports)
    compressed = _compressed_data_edges(writers, readers)
    unpacked = data.unionByName(process).unionByName(realtime).withColumn("packed", F.lit(False))
    table = _with_potential(_distinct_edges(unpacked.unionByName(compressed.withColumn("packed", F.lit(True))),
                                            "packed"), potential).localCheckpoint(eager=True)
    per_kind = {(r["packed"], r["kind"]): r["count"] for r in table.groupBy("packed", "kind").count().collect()}
    by_name = {kind.name: kind for kinds in VARIANTS.values() for kind in kinds}
    graphs = {}
    for graph, (names, packed, kinds_in) in FAMILIES.items():
        kinds = [by_name[name] for name in names]
        selected = F.col("packed") == packed
        if kinds_in is not None:
            selected = selected & F.col("kind").isin(*kinds_in)
        edges = table.where(selected).select(*PLACED)
        count = sum(n for (p, kind), n in per_kind.items() if p == packed and (kinds_in is None or kind in kinds_in))
        if count > edge_cap:
            edges, count = _shrink(edges, count)
        if count > edge_cap:
            graphs[graph] = (kinds, f"{'/'.join(names)} not checked: {count} edges remain after trimming, "
                                    f"above the cap of {edge_cap}")
        else:
            graphs[graph] = (kinds, [row[:4] for row in _rows(edges)] if count else [])

    def times(ops):
        # Few ops: isin. Many (a run full of cycles): a table of them, as a
        # literal list costs a JVM round trip per element.
        chosen = (t.ops.where(F.col("op").isin(ops)) if len(ops) <= 200 else
                  t.ops.join(t.spark.createDataFrame([(op,) for op in ops], "op long"), "op", "left_semi"))
        found = chosen.select("op", "complete_time", "invoke_time").collect()
        return {r["op"]: r["complete_time"] or r["invoke_time"] for r in found}
    return graphs, times


# graph: (anomalies, from the compressed data edges?, kinds kept or None for all)
FAMILIES = {
    "data-wr": (["G1c"], True, [WR]),
    "data": (["G0", "G1c-ww"], True, None),
    "process-wr": (["G1c-process"], False, [WR, PROC, HUB]),
    "process": (["G0-process", "G1c-ww-process"], False, [WW, WR, PROC, HUB]),
    "realtime-wr": (["G1c-realtime"], False, [WR, PROC, HUB, RT]),
    "realtime": (["G0-realtime", "G1c-ww-realtime"], False, None),
}
PLACED = ("src", "dst", "kind", "key", "src_phi", "dst_phi")


# ---------------------------------------------------------------- driver side, small graphs

def _driver_graphs(t: Tables, write_rows, read_rows, graph_ops: DataFrame):
    """The same three graphs as the Spark side builds, for a run small enough to hold."""
    # A semi join, not isin(ops): a literal list costs a JVM round trip per
    # element (20 s for the 25,000 ops of a short run).
    op_rows = (t.ops.join(graph_ops, "op", "left_semi")
               .select("op", "process", "type", "invoke_index", "invoke_time", "complete_time").collect())
    info = {r["op"]: r for r in op_rows}
    nodes_of: dict = {}
    for r in list(write_rows) + list(read_rows):
        nodes_of.setdefault(r["op"], set()).add(r["node"])
    ww, wr = _driver_data_edges(write_rows, read_rows)
    data = ww + wr
    ports, legs = _driver_ports(nodes_of)
    process = _driver_process_edges(info, ports) + legs
    realtime = _driver_realtime_edges(info, ports)
    graphs = {
        "data": (VARIANTS["data"], _dedupe(_driver_compressed_edges(write_rows, read_rows))),
        "process": (VARIANTS["process"], _dedupe(data + process)),
        "realtime": (VARIANTS["realtime"], _dedupe(data + process + realtime)),
    }

    def times(ops):
        return {op: (info[op]["complete_time"] or info[op]["invoke_time"]) if op in info else None for op in ops}
    return graphs, times


def _dedupe(edges):
    best = {}
    for src, dst, kind, key in edges:
        if src == dst:
            continue
        k = (src, dst, kind)
        if k not in best or (key is not None and (best[k] is None or key < best[k])):
            best[k] = key
    return [(src, dst, kind, key) for (src, dst, kind), key in best.items()]


def _chains(write_rows):
    chains: dict = {}
    for r in write_rows:
        if r["position"] is not None:
            chains.setdefault(r["key"], []).append(r)
    for chain in chains.values():
        chain.sort(key=lambda r: (r["position"], r["node"]))
    return chains


def _driver_data_edges(write_rows, read_rows):
    ww = []
    for key, chain in _chains(write_rows).items():
        ww.extend((a["node"], b["node"], WW, key) for a, b in zip(chain, chain[1:]))
    writer_of: dict = {}
    for r in write_rows:
        writer_of.setdefault((r["key"], r["value"]), []).append(r["node"])
    wr = [(w, r["node"], WR, r["key"]) for r in read_rows for w in writer_of.get((r["key"], r["value"]), ())]
    return ww, wr


def _driver_compressed_edges(write_rows, read_rows):
    written: dict = {}
    for r in write_rows:
        written.setdefault(r["node"], set()).add(r["key"])
    readers = {r["node"] for r in read_rows}
    junctions = {node for node, keys in written.items() if len(keys) >= 2 or node in readers}
    edges, owner_of = [], {}
    for key, chain in _chains(write_rows).items():
        owner, next_junction = None, None
        for r in reversed(chain):
            if r["node"] in junctions:
                if next_junction is not None:
                    edges.append((r["node"], next_junction, WW, key))
                next_junction = r["node"]
        for r in chain:
            if r["node"] in junctions:
                owner = r["node"]
            if owner is not None:
                owner_of.setdefault((key, r["value"]), []).append((owner, r["node"]))
    for r in write_rows:
        if r["position"] is None and r["node"] in junctions:
            owner_of.setdefault((r["key"], r["value"]), []).append((r["node"], r["node"]))
    for r in read_rows:
        if r["node"] not in junctions:
            continue
        for owner, writer in owner_of.get((r["key"], r["value"]), ()):
            edges.append((owner, r["node"], WR if owner == writer else WW | WR, r["key"]))
    return edges


def _driver_ports(nodes_of):
    """As _ports and _hub_legs: {op: (out, in)} and the legs of multi-node ops."""
    ports, legs = {}, []
    for op, nodes in nodes_of.items():
        if len(nodes) == 1:
            (node,) = nodes
            ports[op] = (node, node)
            continue
        out, into = op * NODE_SHIFT + OUT_HUB, op * NODE_SHIFT + IN_HUB
        ports[op] = (out, into)
        legs += [(node, out, HUB, None) for node in nodes] + [(into, node, HUB, None) for node in nodes]
    return ports, legs


def _driver_process_edges(info, ports):
    by_process: dict = {}
    for op, r in info.items():
        by_process.setdefault(r["process"], []).append((r["invoke_index"], op))
    edges = []
    for ops in by_process.values():
        ops.sort()
        edges.extend((ports[a][0], ports[b][1], PROC, None) for (_, a), (_, b) in zip(ops, ops[1:]))
    return edges


def _driver_realtime_edges(info, ports):
    """As _realtime_edges: only `ok` completions order ops in real time."""
    ordered = sorted(info.values(), key=lambda r: (r["invoke_time"], r["op"]))
    invokes = [r["invoke_time"] for r in ordered]
    over = {r["op"]: r["complete_time"] if r["type"] == "ok" else None for r in ordered}
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


# ---------------------------------------------------------------- Spark side

def _writers(t: Tables) -> DataFrame:
    """key, value, position, node, op, process of every must-have-happened send."""
    sends_per_op = t.mops.where(F.col("mf") == "send").groupBy("op").agg(F.count(F.lit(1)).alias("n_sends"))
    per_send = (F.col("f") != "txn") & (F.col("n_sends") >= 2)
    node = F.col("op") * NODE_SHIFT + F.when(per_send, F.col("mop_index") + 1).otherwise(F.lit(0))
    positions = facts.positions(t).select("key", "value", "position")
    return (facts.must_writes(t).join(sends_per_op, "op").join(positions, ["key", "value"], "left")
            .select("key", "value", "position", node.alias("node"), "op", "process"))


def _readers(t: Tables) -> DataFrame:
    """key, value, node, op of every `ok` read."""
    return (facts.ok_reads(t).select("key", "value", (F.col("op") * NODE_SHIFT).alias("node"), "op", "process")
            .distinct())


def _edge(df: DataFrame, src: str, dst: str, kind, key: str = "key") -> DataFrame:
    kind_col = kind if not isinstance(kind, int) else F.lit(kind)
    return df.select(F.col(src).alias("src"), F.col(dst).alias("dst"), kind_col.cast("int").alias("kind"),
                     F.col(key).cast("long").alias("key"))


def _distinct_edges(edges: DataFrame, *more: str) -> DataFrame:
    return (edges.where(F.col("src") != F.col("dst"))
            .groupBy("src", "dst", "kind", *more).agg(F.min("key").alias("key")))


def _with_potential(edges: DataFrame, potential: DataFrame) -> DataFrame:
    """Adds src_phi and dst_phi (null for a node without one: it is never covered)."""
    src_phi = potential.select(F.col("node").alias("src"), F.col("phi").alias("src_phi"))
    dst_phi = potential.select(F.col("node").alias("dst"), F.col("phi").alias("dst_phi"))
    return edges.join(src_phi, "src", "left").join(dst_phi, "dst", "left")


def _data_edges(writers: DataFrame, readers: DataFrame) -> DataFrame:
    """Uncompressed ww and wr edges."""
    chain = Window.partitionBy("key").orderBy("position", "node")
    placed = writers.where(F.col("position").isNotNull())
    ww = placed.withColumn("next", F.lead("node").over(chain)).where(F.col("next").isNotNull())
    wr = writers.select("key", "value", F.col("node").alias("w")).join(
        readers.select("key", "value", F.col("node").alias("r")), ["key", "value"])
    return _edge(ww, "node", "next", WW).unionByName(_edge(wr, "w", "r", WR))


def _junctions(writers: DataFrame, readers: DataFrame) -> DataFrame:
    """Nodes that write two keys or both read and write: every data-only cycle passes through one."""
    written = writers.groupBy("node").agg(F.countDistinct("key").alias("n_keys"))
    reading = readers.select("node").distinct().withColumn("reads", F.lit(True))
    return (written.join(reading, "node", "left")
            .where((F.col("n_keys") >= 2) | F.col("reads").isNotNull()).select("node"))


def _compressed_data_edges(writers: DataFrame, readers: DataFrame) -> DataFrame:
    """ww/wr edges between junctions only; a path through plain writers becomes one edge."""
    junctions = _junctions(writers, readers).withColumn("junction", F.lit(True))
    w = writers.join(junctions, "node", "left").withColumn("junction", F.col("junction").isNotNull())
    placed = w.where(F.col("position").isNotNull())
    # The next junction is the last one before this row in reverse order: a growing
    # frame Spark keeps incrementally (a frame to the partition's end is redone per row).
    following = (Window.partitionBy("key").orderBy(F.desc("position"), F.desc("node"))
                 .rowsBetween(Window.unboundedPreceding, -1))
    preceding = Window.partitionBy("key").orderBy("position", "node").rowsBetween(Window.unboundedPreceding, 0)
    junction_node = F.when(F.col("junction"), F.col("node"))
    chained = (placed.withColumn("next_j", F.last(junction_node, ignorenulls=True).over(following))
               .withColumn("owner", F.last(junction_node, ignorenulls=True).over(preceding)))
    ww = chained.where(F.col("junction") & F.col("next_j").isNotNull())
    # Unplaced writers read by someone still give wr edges from themselves.
    owners = (chained.where(F.col("owner").isNotNull()).select("key", "value", "node", "owner")
              .unionByName(w.where(F.col("position").isNull() & F.col("junction"))
                           .select("key", "value", "node", F.col("node").alias("owner"))))
    junction_readers = readers.join(junctions.select("node"), "node", "left_semi")
    wr = owners.join(junction_readers.select("key", "value", F.col("node").alias("r")), ["key", "value"])
    wr_kind = F.when(F.col("owner") == F.col("node"), F.lit(WR)).otherwise(F.lit(WW | WR))
    return _edge(ww, "node", "next_j", WW).unionByName(_edge(wr, "owner", "r", wr_kind))


def _graph_ops(t: Tables, writers: DataFrame, readers: DataFrame) -> DataFrame:
    """node, op, process, type, invoke_index, invoke_time, complete_time, commit_time of every graph node."""
    nodes = writers.select("node", "op").unionByName(readers.select("node", "op")).distinct()
    return nodes.join(t.ops.select("op", "process", "type", "invoke_index", "invoke_time", "complete_time",
                                   "commit_time"), "op")


def _ports(nodes: DataFrame) -> DataFrame:
    """op, out, in: where process and realtime edges leave and enter an op.

    An op of one node uses that node. An op of several nodes (a plain send
    of several records) uses its hubs, so an edge between two ops is one
    edge, not one per pair of their nodes (100 for two 10-record sends).
    """
    per_op = nodes.groupBy("op").agg(F.count(F.lit(1)).alias("n"), F.min("node").alias("only"))
    multi = F.col("n") >= 2
    return per_op.select("op", F.when(multi, F.col("op") * NODE_SHIFT + OUT_HUB).otherwise(F.col("only")).alias("out"),
                         F.when(multi, F.col("op") * NODE_SHIFT + IN_HUB).otherwise(F.col("only")).alias("in"))


def _hub_legs(nodes: DataFrame, ports: DataFrame) -> DataFrame:
    """Every node of a multi-node op -> its out hub, and its in hub -> every node."""
    hubs = nodes.select("op", "node").join(ports, "op").where(F.col("out") != F.col("node"))
    nokey = hubs.withColumn("nokey", F.lit(None))
    return _edge(nokey, "node", "out", HUB, "nokey").unionByName(_edge(nokey, "in", "node", HUB, "nokey"))


def _process_edges(nodes: DataFrame, ports: DataFrame) -> DataFrame:
    """Each graph op -> the same process's next graph op (port to port), plus the hub legs."""
    ops = nodes.select("op", "process", "invoke_index").distinct()
    nxt = ops.withColumn("next_op", F.lead("op").over(Window.partitionBy("process").orderBy("invoke_index")))
    pairs = nxt.where(F.col("next_op").isNotNull()).select("op", "next_op")
    linked = (pairs.join(ports.select("op", F.col("out").alias("a")), "op")
              .join(ports.select(F.col("op").alias("next_op"), F.col("in").alias("b")), "next_op"))
    return _edge(linked.withColumn("nokey", F.lit(None)), "a", "b", PROC, "nokey").unionByName(
        _hub_legs(nodes, ports))


def _realtime_completion() -> F.Column:
    """When an op is over for real-time order: an `ok` op's completion. An
    `info` op never is: its writes may land any time after its invoke (a
    timed-out send that the client still retries), so nothing follows it."""
    return F.when(F.col("type") == "ok", F.col("complete_time"))


def _realtime_edges(nodes: DataFrame, ports: DataFrame) -> DataFrame:
    """Transitive reduction of "A completed before B was invoked" among graph ops of different processes.

    With ops ranked by (invoke time, op): A's targets are the ranks from lo,
    the number of invokes at or before A's completion, up to hi, the number
    at or before the earliest completion among the ops invoked after it (B*).
    One global sweep, newest first, over every invoke and every completion
    gives all three: the invokes seen so far give ranks and lo, their
    smallest (completion, op) gives B*. hi is then B*'s own lo, a join.
    Completions sort before invokes of the same time, which count as before.
    """
    ops = (nodes.select("op", "process", F.col("invoke_time").alias("it"), _realtime_completion().alias("ct"))
           .distinct().localCheckpoint(eager=True))
    total = ops.count()
    done = F.struct(F.col("ct").alias("ct"), F.col("op").alias("op"))
    invokes = ops.select("op", "process", F.col("it").alias("t"), F.lit(1).alias("w"),
                         F.when(F.col("ct").isNotNull(), done).alias("done"))
    completions = ops.where(F.col("ct").isNotNull()).select(
        "op", "process", F.col("ct").alias("t"), F.lit(0).alias("w"), F.lit(None).cast(invokes.schema["done"].dataType).alias("done"))
    newest_first = Window.orderBy(F.desc("t"), "w", F.desc("op")).rowsBetween(Window.unboundedPreceding, 0)
    swept = (invokes.unionByName(completions)
             .select("op", "process", "w", (F.lit(total) - F.sum("w").over(newest_first)).alias("at"),
                     F.min("done").over(newest_first)["op"].alias("b_star"))
             .localCheckpoint(eager=True))
    ranked = swept.where(F.col("w") == 1).select(F.col("at").alias("r"), F.col("op").alias("b_op"),
                                                F.col("process").alias("b_process"))
    lo = swept.where(F.col("w") == 0).select("op", "process", F.col("at").alias("lo"), "b_star")
    spans = (lo.where(F.col("b_star").isNotNull())
             .join(lo.select(F.col("op").alias("b_star"), F.col("lo").alias("hi")), "b_star")
             .where(F.col("hi") > F.col("lo")))
    targets = (spans.select("op", "process", F.explode(F.sequence("lo", F.col("hi") - 1)).alias("r"))
               .join(ranked, "r")
               .where(F.col("process") != F.col("b_process")))
    linked = (targets.join(ports.select("op", F.col("out").alias("a")), "op")
              .join(ports.select(F.col("op").alias("b_op"), F.col("in").alias("b")), "b_op"))
    return _edge(linked.withColumn("nokey", F.lit(None)), "a", "b", RT, "nokey")


def _potential(nodes: DataFrame, readers: DataFrame) -> DataFrame:
    """node, phi: a time inside each op that wr, process and realtime edges of a valid history increase.

    phi is the commit call of a transaction (its reads come before it, and
    its writes become visible only after it), the completion of an op that
    reads (the read came before), and the invoke of a plain writer (its
    record cannot be read before). It lies within the op's interval, so
    process and realtime edges always increase it.
    """
    reading = readers.select("node").distinct().withColumn("reads", F.lit(True))
    start, end = F.col("invoke_time"), F.coalesce("complete_time", F.lit(NO_TIME))
    committed = F.least(F.greatest("commit_time", start), end)
    phi = (F.when(F.col("commit_time").isNotNull(), committed)
           .when(F.col("reads").isNotNull(), F.coalesce("complete_time", "invoke_time"))
           .otherwise(start))
    base = nodes.join(reading, "node", "left").select("node", "op", phi.alias("phi"))
    # Doubled, so that an op's hubs fit strictly between its nodes and its neighbours:
    # out hub just after its latest node, in hub just before its earliest.
    hubs = (base.groupBy("op").agg(F.count(F.lit(1)).alias("n"), F.max("phi").alias("hi"), F.min("phi").alias("lo"))
            .where(F.col("n") >= 2))
    return (base.select("node", (F.col("phi") * 2).alias("phi"))
            .unionByName(hubs.select((F.col("op") * NODE_SHIFT + OUT_HUB).alias("node"), (F.col("hi") * 2 + 1).alias("phi")))
            .unionByName(hubs.select((F.col("op") * NODE_SHIFT + IN_HUB).alias("node"), (F.col("lo") * 2 - 1).alias("phi"))))


def _cover(edges):
    """Keeps edges between nodes whose phi lies inside the span of some edge that does not increase phi.

    Along any cycle phi must come back down, and every value it passes on
    the way down is spanned by such an edge: nodes outside every span lie on
    no cycle. Edges are a DataFrame of PLACED columns or, once small, a list
    of such tuples on the driver; both give the same edges. Returns (edges, count).
    """
    if isinstance(edges, list):
        merged = _merge_spans((dst_phi, src_phi) for _, _, _, _, src_phi, dst_phi in edges
                              if src_phi is not None and dst_phi is not None and dst_phi <= src_phi)
        starts = [a for a, _ in merged]

        def covered(phi):
            i = bisect_right(starts, phi) - 1 if phi is not None else -1
            return i >= 0 and merged[i][1] >= phi
        kept = [e for e in edges if covered(e[4]) and covered(e[5])]
        return kept, len(kept)
    spans = edges.where(F.col("dst_phi") <= F.col("src_phi")).select("dst_phi", "src_phi").distinct()
    few = spans.limit(FEW_SPANS + 1).collect()
    merged = _merge_spans(tuple(r) for r in few) if len(few) <= FEW_SPANS else None
    if merged is not None and len(merged) <= FEW_INTERVALS:
        # Few spans (a valid run's wr-only graphs have almost none): a filter, no sort.
        def covered(phi):
            return reduce(lambda a, b: a | b, [phi.between(lo, hi) for lo, hi in merged], F.lit(False))
        kept = edges.where(covered(F.col("src_phi")) & covered(F.col("dst_phi")))
    else:
        kept = _swept(edges)
    kept = kept.select(*PLACED).localCheckpoint(eager=True)
    return kept, kept.count()


def _merge_spans(spans) -> list[tuple[int, int]]:
    """Closed intervals (lo, hi) merged into sorted disjoint ones."""
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _swept(edges: DataFrame) -> DataFrame:
    """The cover filter for many spans: one sort of spans and nodes, a running maximum, no range join."""
    spans = (edges.where(F.col("dst_phi") <= F.col("src_phi"))
             .select(F.col("dst_phi").alias("at"), F.col("src_phi").alias("reach"), F.lit(None).cast("long").alias("node")))
    points = (edges.select(F.col("src").alias("node"), F.col("src_phi").alias("at"))
              .unionByName(edges.select(F.col("dst").alias("node"), F.col("dst_phi").alias("at")))
              .where(F.col("at").isNotNull()).distinct()
              .select("at", F.lit(None).cast("long").alias("reach"), "node"))
    sweep = Window.orderBy("at", F.col("node").isNotNull()).rowsBetween(Window.unboundedPreceding, 0)
    covered = (spans.unionByName(points).withColumn("furthest", F.max("reach").over(sweep))
               .where(F.col("node").isNotNull() & (F.col("furthest") >= F.col("at"))).select("node"))
    return (edges.join(covered.withColumnRenamed("node", "src"), "src", "left_semi")
            .join(covered.withColumnRenamed("node", "dst"), "dst", "left_semi"))


def _rows(edges) -> list[tuple]:
    return edges if isinstance(edges, list) else [tuple(r) for r in edges.select(*PLACED).collect()]


def _small(edges, count: int):
    """A graph of at most DRIVER_SHRINK edges continues on the driver: no more Spark jobs for it."""
    return _rows(edges) if not isinstance(edges, list) and count <= DRIVER_SHRINK else edges


def _shrink(edges, count: int):
    """Cover filter and trimming, alternated (twice at most: each pass is a few full sorts)."""
    for _ in range(SHRINK_ROUNDS):
        edges, covered_count = _cover(_small(edges, count))
        edges, new_count = _trim(edges, covered_count)
        if new_count == count or new_count == 0:
            return edges, new_count
        count = new_count
    return edges, count


def _trim(edges, count: int):
    """Drops edges whose source has no in-edge or whose target has no out-edge, a few rounds.

    Only run when the graph is too big to collect: small graphs go to the driver as they are.
    """
    current = edges
    for _ in range(TRIM_ROUNDS):
        if count == 0:
            break
        current = _small(current, count)
        if isinstance(current, list):
            has_in = {e[1] for e in current}
            has_out = {e[0] for e in current}
            current = [e for e in current if e[0] in has_in and e[1] in has_out]
            new_count = len(current)
        else:
            has_in = current.select(F.col("dst").alias("src")).distinct()
            has_out = current.select(F.col("src").alias("dst")).distinct()
            current = (current.join(has_in, "src", "left_semi").join(has_out, "dst", "left_semi")
                       .select(*PLACED).localCheckpoint(eager=True))
            new_count = current.count()
        if new_count == count:
            break
        count = new_count
    return current, count


# ---------------------------------------------------------------- driver side

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


def search(graph: list[tuple], allowed: int, required: int) -> list[list[tuple]]:
    """Shortest closed walks using only ``allowed`` kinds and every ``required`` kind, one per SCC.

    ``graph`` is a list of (src, dst, kind, key). A walk is a list of
    (node, kind, key): the node and the edge leaving it.
    """
    adjacency: dict = {}
    for src, dst, kind, key in sorted(graph, key=lambda e: (e[0], e[1], e[2])):
        if kind & ~(allowed | HUB) == 0:
            adjacency.setdefault(src, []).append((dst, kind, key))
            adjacency.setdefault(dst, [])
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
