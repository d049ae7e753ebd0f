"""G0/G1c cycle families: each found on a small history, and absent from a near-identical one.

Scenarios use disjoint keys and processes, so one run holds them all and
Spark is started on it once per module (the checker work, not the
assertions, is what costs time); each test then asserts one property of its
scenario's ops.
"""

from __future__ import annotations

import json
import random

import pytest

from checkers import cycles
from checkers.load import load
from txn_events import op, poll, send

pytestmark = pytest.mark.spark

KEYS = 24


def inv(process, f, mops):
    invoke_mops = [{"f": "send", "key": m["key"], "value": m["value"]} if m["f"] == "send" else {"f": "poll"}
                   for m in mops]
    return {"process": process, "type": "invoke", "f": f, "mops": invoke_mops}


def done(process, f, mops, **fields):
    return {"process": process, "type": "ok", "f": f, "mops": mops, **fields}


# Each scenario: (events, k = first key, p = first process). Ops of a scenario are its completions.

def g0(k, p, cycle=True):
    """T1 writes k@0, k+1@1; T2 writes k@1 and k+1 at 0 (cycle) or 2 (none)."""
    return (op(p, "txn", [send(k, 1, 0), send(k + 1, 2, 1)], txn_id=f"a{p}")
            + op(p + 1, "txn", [send(k, 3, 1), send(k + 1, 4, 0 if cycle else 2)], txn_id=f"b{p}"))


def g1c(k, p, cycle=True):
    """T1 writes k and reads T2's k+1; T2 writes k+1 and (if cycle) reads T1's k."""
    return (op(p, "txn", [send(k, 1, 0), poll(k + 1, 0, 2)], txn_id=f"a{p}")
            + op(p + 1, "txn", [send(k + 1, 2, 0)] + ([poll(k, 0, 1)] if cycle else []), txn_id=f"b{p}"))


def g1c_ww(k, p, plain_writers=0):
    """T1 writes k@0 and reads T2's k+1; plain writers of k in between; T2 writes k last and k+1."""
    events = op(p, "txn", [send(k, 1, 0), poll(k + 1, 0, 2)], txn_id=f"a{p}")
    for i in range(plain_writers):
        events += op(p + 2 + i, "send", [send(k, 10 + i, 1 + i)])
    return events + op(p + 1, "txn", [send(k, 3, 1 + plain_writers), send(k + 1, 2, 0)], txn_id=f"b{p}")


def g1c_process(k, p, same_process=True):
    """A (p) reads D's k+1 then B (p) writes k; C (p+1) reads B's k then D writes k+1 (in p+1, or p+2)."""
    d = p + 1 if same_process else p + 2
    return [inv(p, "poll", [{"f": "poll"}]), inv(p + 1, "poll", [{"f": "poll"}]),
            done(p, "poll", [poll(k + 1, 0, 2)]), done(p + 1, "poll", [poll(k, 0, 1)]),
            inv(p, "send", [send(k, 1)]), inv(d, "send", [send(k + 1, 2)]),
            done(p, "send", [send(k, 1, 0)]), done(d, "send", [send(k + 1, 2, 0)])]


def g0_process(k, p, cycle=True):
    """One process sends twice to k; the second value lands first (cycle) or after."""
    return op(p, "send", [send(k, 1, 1 if cycle else 0)]) + op(p, "send", [send(k, 2, 0 if cycle else 1)])


def g0_realtime(k, p, cycle=True):
    """Two processes, one after the other, send to k; the later value lands first (cycle) or after."""
    return op(p, "send", [send(k, 1, 1 if cycle else 0)]) + op(p + 1, "send", [send(k, 2, 0 if cycle else 1)])


def g1c_realtime(k, p, cycle=True):
    """A (p) reads k's value 1, written by B (p+1) invoked after A completed (cycle) or overlapping A."""
    if cycle:
        return op(p, "poll", [poll(k, 0, 1)]) + op(p + 1, "send", [send(k, 1, 0)])
    return [inv(p, "poll", [{"f": "poll"}]), inv(p + 1, "send", [send(k, 1)]),
            done(p, "poll", [poll(k, 0, 1)]), done(p + 1, "send", [send(k, 1, 0)])]


def g1c_ww_realtime(k, p):
    """A -ww(k)-> B -wr(k+1)-> C -rt-> A, where B overlaps A and C, so no cycle without the ww edge."""
    return [{"process": p + 1, "type": "invoke", "f": "txn", "txn_id": f"b{p}", "mops": [send(k, 2), send(k + 1, 3)]},
            inv(p + 2, "poll", [{"f": "poll"}]),
            done(p + 2, "poll", [poll(k + 1, 0, 3)]),
            inv(p, "send", [send(k, 1)]),
            done(p, "send", [send(k, 1, 0)]),
            done(p + 1, "txn", [send(k, 2, 1), send(k + 1, 3, 0)], txn_id=f"b{p}")]


def multi_send(k, p):
    """A plain op with two sends interleaved with another's: no G0, its sends are not atomic."""
    return op(p, "send", [send(k, 1, 0), send(k + 1, 2, 1)]) + op(p + 1, "send", [send(k, 3, 1), send(k + 1, 4, 0)])


def combine(scenarios: dict):
    """One history from named scenarios; returns it and each scenario's op ids (completion indices)."""
    events, ops = [], {}
    for name, scenario in scenarios.items():
        start = len(events)
        events += scenario
        ops[name] = {start + i for i, e in enumerate(scenario) if e["type"] != "invoke"}
    return events, ops


POSITIVE = {
    "g0": g0(0, 0), "g1c": g1c(2, 10), "g1c_ww": g1c_ww(4, 20), "compressed": g1c_ww(6, 30, plain_writers=2),
    "g1c_process": g1c_process(8, 40), "g0_process": g0_process(10, 50), "g1c_realtime": g1c_realtime(11, 60),
    "g0_realtime": g0_realtime(12, 70), "g1c_ww_realtime": g1c_ww_realtime(13, 80), "multi_send": multi_send(15, 90),
}
NEGATIVE = {
    "g0": g0(0, 0, cycle=False), "g1c": g1c(2, 10, cycle=False), "g1c_process": g1c_process(8, 40, same_process=False),
    "g0_process": g0_process(10, 50, cycle=False), "g1c_realtime": g1c_realtime(11, 60, cycle=False),
    "g0_realtime": g0_realtime(12, 70, cycle=False),
}


def write(directory, events):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "history.jsonl", "w") as out:
        for index, event in enumerate(events):
            out.write(json.dumps({"index": index, "time": 1000 * index, **event}) + "\n")
    test = {"name": "cycles", "keys": {str(k): ["t", k] for k in range(KEYS)},
            "client": {"isolation.level": "read_committed"}, "drain": {"complete": True}}
    (directory / "test.json").write_text(json.dumps(test))
    return directory


def run(spark, directory, scenarios, **options):
    events, ops = combine(scenarios)
    rows = cycles.find(load(write(directory, events), spark), **options).collect()
    return rows, ops


@pytest.fixture(scope="module")
def positive(spark, tmp_path_factory):
    return run(spark, tmp_path_factory.mktemp("positive"), POSITIVE)


@pytest.fixture(scope="module")
def negative(spark, tmp_path_factory):
    return run(spark, tmp_path_factory.mktemp("negative"), NEGATIVE)


def of(result, scenario):
    """name -> row for the cycles made of the scenario's ops."""
    rows, ops = result
    return {row["name"]: row for row in rows if set(row["ops"]) <= ops[scenario]}


def ids(result, scenario):
    return sorted(result[1][scenario])


def test_g0_is_found_with_its_ops_in_order(positive):
    found = of(positive, "g0")
    assert "G0" in found and "G1c" not in found and "G1c-ww" not in found
    a, b = ids(positive, "g0")
    assert found["G0"]["cycle"] in (f"op {a} -ww(key 0)-> op {b} -ww(key 1)-> op {a}",
                                    f"op {b} -ww(key 1)-> op {a} -ww(key 0)-> op {b}")
    assert found["G0"]["key"] in (0, 1) and found["G0"]["time"] is not None


def test_no_g0_when_writes_agree(negative):
    assert "G0" not in of(negative, "g0")


def test_wr_only_cycle_is_g1c(positive):
    found = of(positive, "g1c")
    assert "G1c" in found and "G1c-ww" not in found and "G0" not in found
    assert sorted(found["G1c"]["ops"]) == ids(positive, "g1c")
    assert found["G1c"]["cycle"].count("-wr(key ") == 2


def test_no_g1c_without_the_second_read(negative):
    found = of(negative, "g1c")
    assert "G1c" not in found and "G1c-ww" not in found


def test_cycle_needing_a_ww_edge_is_g1c_ww(positive):
    found = of(positive, "g1c_ww")
    assert "G1c-ww" in found and "G1c" not in found
    a, b = ids(positive, "g1c_ww")
    assert found["G1c-ww"]["cycle"] in (f"op {a} -ww(key 4)-> op {b} -wr(key 5)-> op {a}",
                                        f"op {b} -wr(key 5)-> op {a} -ww(key 4)-> op {b}")


def test_plain_writers_between_junctions_compress_to_one_ww_edge(positive):
    found = of(positive, "compressed")
    a, *_, b = ids(positive, "compressed")
    assert "G1c-ww" in found and "G1c" not in found
    assert f"op {a} -ww(key 6)-> op {b}" in found["G1c-ww"]["cycle"]


def test_g1c_process_is_found(positive):
    found = of(positive, "g1c_process")
    assert "G1c-process" in found and "G1c" not in found
    assert sorted(found["G1c-process"]["ops"]) == ids(positive, "g1c_process")
    cycle = found["G1c-process"]["cycle"]
    assert cycle.count("-process->") == 2 and cycle.count("-wr(key ") == 2


def test_no_g1c_process_without_process_order(negative):
    assert "G1c-process" not in of(negative, "g1c_process")


def test_g0_process_is_found(positive):
    found = of(positive, "g0_process")
    a, b = ids(positive, "g0_process")
    assert found["G0-process"]["cycle"] in (f"op {a} -process-> op {b} -ww(key 10)-> op {a}",
                                            f"op {b} -ww(key 10)-> op {a} -process-> op {b}")
    assert "G0-realtime" not in found, "same-process order is process order, not real time"


def test_no_g0_process_when_sends_land_in_order(negative):
    assert of(negative, "g0_process") == {}


def test_g1c_realtime_is_found(positive):
    found = of(positive, "g1c_realtime")
    assert set(found) == {"G1c-realtime"}
    a, b = ids(positive, "g1c_realtime")
    assert found["G1c-realtime"]["key"] == 11
    assert found["G1c-realtime"]["cycle"] in (f"op {a} -realtime-> op {b} -wr(key 11)-> op {a}",
                                              f"op {b} -wr(key 11)-> op {a} -realtime-> op {b}")


def test_no_g1c_realtime_when_ops_overlap(negative):
    assert of(negative, "g1c_realtime") == {}


def test_g0_realtime_is_found(positive):
    found = of(positive, "g0_realtime")
    assert set(found) == {"G0-realtime"}
    assert sorted(found["G0-realtime"]["ops"]) == ids(positive, "g0_realtime")


def test_no_g0_realtime_when_sends_land_in_order(negative):
    assert of(negative, "g0_realtime") == {}


def test_g1c_ww_realtime_is_found(positive):
    found = of(positive, "g1c_ww_realtime")
    assert set(found) == {"G1c-ww-realtime"}
    assert sorted(found["G1c-ww-realtime"]["ops"]) == ids(positive, "g1c_ww_realtime")


def test_plain_op_with_several_sends_is_one_node_per_send(positive):
    assert "G0" not in of(positive, "multi_send")


def test_spark_path_finds_what_the_driver_path_finds(spark, tmp_path, positive):
    """Big runs build the graphs in Spark: forced here, it must report exactly the same cycles."""
    big, _ = run(spark, tmp_path, POSITIVE, driver_limit=0)
    assert sorted((r["name"], r["cycle"]) for r in big) == sorted((r["name"], r["cycle"]) for r in positive[0])


def test_edge_cap_says_the_search_was_incomplete(spark, tmp_path):
    rows, _ = run(spark, tmp_path, {"g0": g0(0, 0)}, edge_cap=1, driver_limit=0)
    assert rows and all("not checked" in row["cycle"] and "above the cap of 1" in row["cycle"] for row in rows)
    bad_families = {"G1c", "G1c-process", "G1c-realtime"}
    for row in rows:
        families = set(row["cycle"].split(" not checked")[0].split("/"))
        # a skipped graph of only always-permitted families cannot change the verdict
        expected = "cycle-search-incomplete" if families & bad_families else "permitted-cycle-search-incomplete"
        assert row["name"] == expected, row
    assert any(row["cycle"].startswith("G0/G1c-ww not checked") for row in rows)


def test_cover_filter_empties_a_valid_graph_before_the_cap(spark, tmp_path):
    """Every edge of these valid scenarios moves forward in time: nothing is left to collect."""
    valid = {"g0": g0(0, 0, cycle=False), "g0_process": g0_process(10, 50, cycle=False),
             "g1c_realtime": g1c_realtime(11, 60, cycle=False), "g0_realtime": g0_realtime(12, 70, cycle=False)}
    rows, _ = run(spark, tmp_path, valid, edge_cap=0, driver_limit=0)
    assert rows == []


def test_search_requires_every_kind():
    graph = [(1, 2, cycles.WW, 0), (2, 1, cycles.WR, 1), (2, 3, cycles.WR, 2), (3, 1, cycles.RT, None)]
    assert [len(w) for w in cycles.search(graph, cycles.WW | cycles.WR | cycles.RT, cycles.WW | cycles.RT)] == [3]
    assert [len(w) for w in cycles.search(graph, cycles.WW | cycles.WR, cycles.WW | cycles.WR)] == [2]
    assert cycles.search(graph, cycles.WW | cycles.RT, cycles.WW) == []


def test_tarjan_handles_long_chains_without_recursion():
    n = 50_000
    adjacency = {i: [(i + 1, 1, 0)] for i in range(n)}
    adjacency[n] = [(0, 1, 0)]
    components = cycles.strongly_connected(adjacency)
    assert len(components) == 1 and len(components[0]) == n + 1


def g0_realtime_multi(k, p):
    """Two plain 2-record sends, one after the other; on key k the later op's record lands first.

    The realtime edge joins the ops' hubs, not each pair of their records."""
    return (op(p, "send", [send(k, 1, 1), send(k + 1, 2, 0)])
            + op(p + 1, "send", [send(k, 3, 0), send(k + 1, 4, 1)]))


@pytest.mark.parametrize("driver_limit", [cycles.DRIVER_LIMIT, 0])
def test_realtime_cycle_through_multi_record_sends_is_reported_without_hubs(spark, tmp_path, driver_limit):
    rows, ops = run(spark, tmp_path, {"multi": g0_realtime_multi(20, 100)}, driver_limit=driver_limit)
    found = {row["name"]: row for row in rows}
    assert "G0-realtime" in found and "G0" not in found
    a, b = sorted(ops["multi"])
    assert sorted(found["G0-realtime"]["ops"]) == [a, b]
    assert found["G0-realtime"]["cycle"] in (f"op {a} send 0 -realtime-> op {b} send 0 -ww(key 20)-> op {a} send 0",
                                             f"op {b} send 0 -ww(key 20)-> op {a} send 0 -realtime-> op {b} send 0")


def _random_placed(seed, n_edges=400, n_nodes=60):
    import random
    rng = random.Random(seed)
    phi = {node: rng.randrange(0, 200) for node in range(n_nodes)}
    phi[n_nodes - 1] = None  # a node without a potential is never covered
    edges = {}
    for _ in range(n_edges):
        src, dst = rng.sample(range(n_nodes), 2)
        if phi[src] is not None and phi[dst] is not None and phi[src] > phi[dst] + 5 and rng.random() < 0.97:
            src, dst = dst, src  # mostly forward, as in a valid run: a few short spans
        kind = rng.choice([cycles.WW, cycles.WR, cycles.PROC, cycles.RT])
        edges[(src, dst, kind)] = (src, dst, kind, rng.randrange(3), phi[src], phi[dst])
    return sorted(edges.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cover_and_trim_shortcuts_keep_exactly_the_sweeps_edges(spark, monkeypatch, seed):
    """The few-spans filter and the driver-side rounds are shortcuts of the sorted sweep: same edges."""
    rows = _random_placed(seed)
    schema = "src long, dst long, kind int, key long, src_phi long, dst_phi long"
    frame = spark.createDataFrame(rows, schema)
    swept = sorted(tuple(r) for r in cycles._swept(frame).select(*cycles.PLACED).collect())
    on_driver, _ = cycles._cover(list(rows))
    assert sorted(on_driver) == swept
    monkeypatch.setattr(cycles, "FEW_INTERVALS", 10_000)
    filtered, count = cycles._cover(frame)
    assert sorted(tuple(r) for r in filtered.collect()) == swept and count == len(swept)
    monkeypatch.setattr(cycles, "FEW_INTERVALS", 0)
    monkeypatch.setattr(cycles, "DRIVER_SHRINK", -1)
    in_spark, spark_count = cycles._shrink(frame, len(rows))
    monkeypatch.setattr(cycles, "DRIVER_SHRINK", 10**9)
    driver, driver_count = cycles._shrink(frame, len(rows))
    assert sorted(cycles._rows(in_spark)) == sorted(driver) and spark_count == driver_count


def _random_ops(seed: int, count: int = 120):
    """Ops of a few processes with clashing times, some never completed, some `info`, some of two nodes."""
    rng = random.Random(seed)
    rows, clock = [], {}
    for op in range(1, count + 1):
        process = str(rng.randrange(5))
        invoke = max(clock.get(process, 0), rng.randrange(0, 40)) + rng.randrange(0, 3)
        complete = None if rng.random() < 0.1 else invoke + rng.randrange(0, 6)
        outcome = "info" if complete is None or rng.random() < 0.1 else "ok"
        clock[process] = (complete if complete is not None else invoke) + 1
        for sub in range(1 + (rng.random() < 0.3)):
            rows.append((op * cycles.NODE_SHIFT + sub, op, process, outcome, invoke, complete))
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_realtime_edges_in_spark_are_the_drivers(spark, seed):
    """The one-sweep Spark reduction gives exactly the driver's edges, ties and open ops included."""
    rows = _random_ops(seed)
    nodes = spark.createDataFrame(rows, "node long, op long, process string, type string, invoke_time long, "
                                        "complete_time long")
    in_spark = sorted({tuple(r) for r in cycles._realtime_edges(nodes, cycles._ports(nodes))
                       .select("src", "dst", "kind").collect()})
    info = {op: {"op": op, "process": p, "type": kind, "invoke_time": i, "complete_time": c}
            for _, op, p, kind, i, c in rows}
    nodes_of: dict = {}
    for node, op, *_ in rows:
        nodes_of.setdefault(op, set()).add(node)
    ports, _ = cycles._driver_ports(nodes_of)
    on_driver = sorted({(a, b, kind) for a, b, kind, _ in cycles._driver_realtime_edges(info, ports)})
    assert in_spark == on_driver and len(on_driver) > 50


def g0_realtime_after_info(k, p, outcome):
    """A send of k ends `outcome` (info: timed out, no offset), then another process sends k;
    a reader finds the later op's record first and A's after it."""
    first = (op(p, "send", [send(k, 1)], type="info", error="_MSG_TIMED_OUT") if outcome == "info"
             else op(p, "send", [send(k, 1, 1)]))
    return first + op(p + 1, "send", [send(k, 2, 0)]) + op(p + 2, "poll", [poll(k, 0, 2), poll(k, 1, 1)])


@pytest.mark.parametrize("driver_limit", [cycles.DRIVER_LIMIT, 0])
def test_an_info_op_orders_nothing_in_real_time(spark, tmp_path, driver_limit):
    """A timed-out send may still land after later ops (the demo's false G0-realtime); an `ok` one may not."""
    rows, _ = run(spark, tmp_path / "info", {"info": g0_realtime_after_info(20, 100, "info")}, driver_limit=driver_limit)
    assert rows == []
    rows, _ = run(spark, tmp_path / "ok", {"ok": g0_realtime_after_info(20, 100, "ok")}, driver_limit=driver_limit)
    assert {row["name"] for row in rows} == {"G0-realtime"}
