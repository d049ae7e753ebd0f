"""The per-key pass's tasks: their input read once, and their keys run a few at a time (issue 42).

A task of the main pass holds the rows of the keys its partition got; at
10M events of the eos shape that is two keys of about 900,000 rows each.
`passes.key_chunks` hands the pass whole keys (of rows sorted by key), at most KEY_CHUNK_ROWS rows
at a time; whatever the split, the pass's rows must be the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from history_shapes import generate  # noqa: E402

from checkers import passes  # noqa: E402
from checkers.arrays import NULL  # noqa: E402
from checkers.keypass import ANOMALY, EOS_OUT, INPUT_COLUMNS  # noqa: E402
from checkers.packed_order import packed_order  # noqa: E402


def _columns(keys: list[int]) -> dict[str, np.ndarray]:
    n = len(keys)
    columns = {name: np.arange(n, dtype=np.int64) * (i + 1) for i, name in enumerate(INPUT_COLUMNS)}
    columns["key"] = np.array(keys, dtype=np.int64)
    return columns


def test_chunks_hold_whole_keys_in_their_order_and_no_more_rows_than_asked_unless_one_key_has_more():
    keys = [1, 1, 1, 2, 2, 3, 3, 3, 4, 5, 5, 5, 5, 5]  # sorted by key, as streamed_key_chunks gathers them
    columns = _columns(keys)
    original = {name: values.copy() for name, values in columns.items()}
    chunks = list(passes.key_chunks(columns, 4))
    seen = []
    for chunk in chunks:
        chunk_keys = set(chunk["key"].tolist())
        assert len(chunk["key"]) <= 4 or len(chunk_keys) == 1
        seen += chunk["op"].tolist()
        for key in chunk_keys:
            # every row of a key is in its chunk, in the order the task got them
            assert chunk["op"][chunk["key"] == key].tolist() == original["op"][original["key"] == key].tolist()
    assert sorted(seen) == sorted(original["op"].tolist())
    assert [sorted(set(c["key"].tolist())) for c in chunks] == [[1], [2], [3, 4], [5]]
    # rows of a column stay with their row
    for chunk in chunks:
        assert np.array_equal(chunk["value"], chunk["op"] * (INPUT_COLUMNS.index("value") + 1) // 3)


def test_rows_that_fit_at_once_come_back_as_they_are():
    columns = _columns([2, 1, 2])
    [chunk] = passes.key_chunks(columns, 3)
    assert chunk is columns and chunk["key"].tolist() == [2, 1, 2]


def test_input_columns_join_the_batches_in_order_and_skip_empty_ones():
    whole = _columns([1, 2, 3, 4, 5])

    def batch(lo, hi):
        return pa.record_batch({name: whole[name][lo:hi] for name in INPUT_COLUMNS})

    batches = [batch(0, 2), batch(2, 2), batch(2, 5)]
    columns = passes.input_columns(iter(batches))
    assert list(columns) == list(INPUT_COLUMNS)
    for name in INPUT_COLUMNS:
        assert columns[name].dtype == np.int64 and columns[name].tolist() == whole[name].tolist()
    assert passes.input_columns(iter([])) is None
    assert passes.input_columns(iter([batch(0, 0)])) is None


def _batches(columns: dict[str, np.ndarray], size: int) -> list[pa.RecordBatch]:
    n = len(columns["key"])
    return [
        pa.record_batch({name: columns[name][low : low + size] for name in INPUT_COLUMNS}) for low in range(0, n, size)
    ]


def test_streamed_chunks_hold_whole_keys_and_go_as_soon_as_their_keys_are_in():
    keys = sorted([1] * 5 + [2] * 2 + [3] * 3 + [4] * 6 + [6] * 1 + [7] * 2)
    columns = _columns(keys)
    read = []

    def batches():
        for i, batch in enumerate(_batches(columns, 3)):
            read.append(i)
            yield batch

    chunks = passes.streamed_key_chunks(batches(), 4)
    streamed = [(chunk["key"].tolist(), chunk["op"].tolist(), len(read)) for chunk in chunks]
    assert sum((ops for _, ops, _ in streamed), []) == columns["op"].tolist()  # every row once, in order
    chunk_keys = [sorted(set(k)) for k, _, _ in streamed]
    assert sorted(sum(chunk_keys, [])) == [1, 2, 3, 4, 6, 7]  # a key in one chunk only
    assert all(len(k) <= 4 or len(set(k)) == 1 for k, _, _ in streamed)
    # key 1 (rows 0-4) goes once key 2 shows up in the second batch, long before the last of 7 batches
    assert chunk_keys[0] == [1] and streamed[0][2] == 2
    assert all(at < 7 for _, _, at in streamed[:-1])


def test_streamed_chunks_refuse_rows_not_sorted_by_key():
    with pytest.raises(RuntimeError, match="unsorted"):
        list(passes.streamed_key_chunks(iter(_batches(_columns([1, 1, 2, 2, 1, 3]), 3)), 2))


@pytest.mark.spark
@pytest.mark.parametrize(("shape", "tag"), [("eos", EOS_OUT), ("queue", ANOMALY)])
def test_the_main_pass_finds_the_same_rows_whatever_keys_a_task_runs_at_once(spark, tmp_path, monkeypatch, shape, tag):
    from dataclasses import replace

    from pyspark.sql import functions as F

    from checkers.load import load
    from checkers.table_format import KEY_KINDS

    generate(shape, tmp_path, 6000)
    t = load(tmp_path, spark)
    try:
        params = replace(passes.main_params(t), examples=3)

        def rows(most):
            monkeypatch.setattr(passes, "KEY_CHUNK_ROWS", most)
            return sorted(map(repr, passes.key_pass(t, params).toArrow().to_pylist()))

        whole = rows(1 << 30)
        # as before chunks: every row of the task at once, in the order the table holds them
        at_once = t.rows.where(F.col("kind").isin(*KEY_KINDS)).selectExpr(*passes.INPUT_EXPRESSIONS)
        at_once = at_once.mapInArrow(passes._runner(params), passes.OUTPUT_SCHEMA).toArrow().to_pylist()
        assert sorted(map(repr, at_once)) == whole
        assert len(whole) > 100 and any(f"'tag': {tag}," in row for row in whole)  # eos outputs, anomalies
        assert rows(1) == whole  # one key at a time
        assert rows(400) == whole  # a few small keys at once, big ones alone
    finally:
        t.release()


@pytest.mark.spark
def test_the_main_pass_spans_equal_those_of_the_whole_graph_and_its_flags_come_as_bytes(spark, tmp_path):
    """The main pass makes each part of the graph's edges into SPAN rows as
    it goes (KeyPass._graph with spans): the same rows as the definition over
    the whole graph, its edges stacked (docs/CHECKERS.md, cycles)."""
    from collections import Counter

    from pyspark.sql import functions as F

    from checkers.keypass import S_CWR, S_CWW, S_WR, S_WW, SPAN, WR, WW, KeyPass
    from checkers.load import load
    from checkers.table_format import KEY_KINDS

    assert "G1c" in generate("longtxn", tmp_path, 6000)["planted"]
    t = load(tmp_path, spark)
    try:
        params = passes.main_params(t)
        table = t.rows.where(F.col("kind").isin(*KEY_KINDS)).selectExpr(*passes.INPUT_EXPRESSIONS).toArrow()
        columns = {name: table.column(name).to_numpy() for name in INPUT_COLUMNS}
    finally:
        t.release()
    assert {columns[name].dtype for name in ("kind", "is_txn", "tcode", "reads")} == {np.dtype(np.int8)}
    streamed = Counter()
    for part in KeyPass(columns, params).run().parts:
        if part["tag"][0] == SPAN:
            streamed.update(zip(part["a"].tolist(), part["b"].tolist(), part["c"].tolist()))
    edges, compressed, _ = KeyPass(columns, params)._graph(with_nodes=False)
    expected = Counter()
    for component, graph, wanted in (
        (S_WW, edges, WW),
        (S_WR, edges, WR),
        (S_CWR, compressed, WR),
        (S_CWW, compressed, None),
    ):
        src, dst, kind, _key, src_phi, dst_phi = graph
        chosen = (dst_phi <= src_phi) & (src != dst) & ((kind == wanted) if wanted is not None else (kind != WR))
        expected.update((component, b, c) for b, c in zip(dst_phi[chosen].tolist(), src_phi[chosen].tolist()))
    assert streamed == expected
    assert {component for component, _b, _c in expected} >= {S_WR}  # the planted cycle's backward read


def _part(tag: int, **columns) -> dict:
    n = len(next(iter(columns.values())))
    part = {"tag": np.full(n, tag, dtype=np.int32), "name": None, "n": n, "lists": {}}
    for column in ("key", "value", "offset", "time", "a", "b", "c", "d"):
        part[column] = np.array(columns.get(column, [-1] * n), dtype=np.int64)
    return part


def test_unseen_keeps_a_node_or_route_once_per_task_and_other_rows_as_they_are():
    from checkers.keypass import EDGE, NODE, ROUTE

    seen = {tag: np.empty(0, dtype=np.int64) for tag in passes.TASK_DISTINCT}
    first = passes._unseen(seen, _part(NODE, a=[10, 11], b=[1, 1], d=[2, 3]))
    assert first["n"] == 2
    # node 10 again in set 2 is old; in set 3 it is new, as is node 12
    second = passes._unseen(seen, _part(NODE, a=[10, 10, 12], b=[1, 1, 2], d=[2, 3, 3]))
    assert (second["n"], second["a"].tolist(), second["d"].tolist(), second["b"].tolist()) == (
        2,
        [10, 12],
        [3, 3],
        [1, 2],
    )
    assert passes._unseen(seen, _part(NODE, a=[10, 11], b=[1, 1], d=[2, 3])) is None
    assert passes._unseen(seen, _part(ROUTE, a=[5, 6]))["n"] == 2
    assert passes._unseen(seen, _part(ROUTE, a=[6])) is None
    edges = _part(EDGE, key=[1, 1], a=[10, 10], b=[11, 11], c=[1, 1], d=[3, 3])
    assert passes._unseen(seen, edges) is edges  # an edge is a key's own: repeats are kept


@pytest.mark.spark
def test_the_cycle_pass_key_by_key_finds_the_same_rows_as_a_task_at_once(spark, tmp_path, monkeypatch):
    """The cycle mode runs a task's keys a chunk at a time, as the main pass
    does; with its nodes and routes kept once per task, its rows are those of
    the task's keys run at once, every interval set wide open."""
    from collections import Counter

    from pyspark.sql import functions as F

    from checkers.keypass import EDGE, I_ALL, I_C, I_CWR, I_WR, NODE, ROUTE, Params
    from checkers.load import load
    from checkers.table_format import KEY_KINDS

    generate("longtxn", tmp_path, 6000)
    t = load(tmp_path, spark)
    try:
        everything = (np.array([-(1 << 62)]), np.array([1 << 62]))
        params = Params(
            mode="cycles",
            read_txns=passes.main_params(t).read_txns,
            intervals={family: everything for family in (I_CWR, I_C, I_WR, I_ALL)},
            wide=everything,
        )

        def rows(most):
            monkeypatch.setattr(passes, "KEY_CHUNK_ROWS", most)
            return Counter(map(repr, passes.key_pass(t, params).toArrow().to_pylist()))

        at_once = t.rows.where(F.col("kind").isin(*KEY_KINDS)).selectExpr(*passes.INPUT_EXPRESSIONS)
        at_once = Counter(
            map(repr, at_once.mapInArrow(passes._runner(params), passes.OUTPUT_SCHEMA).toArrow().to_pylist())
        )
        tags = Counter(int(row.split("'tag': ")[1].split(",")[0]) for row in at_once.elements())
        assert tags[EDGE] > 100 and tags[NODE] > 100 and tags[ROUTE] > 0
        assert rows(1) == at_once  # one key at a time
        assert rows(1 << 30) == at_once
    finally:
        t.release()


def test_the_packed_order_is_the_four_columns_order_nulls_first(spark):
    # key, pid, op, mop_index with nulls (the NULL sentinel) and negative
    # values; ranges measured as the load measures them, over the non-null.
    rng = np.random.default_rng(11)
    n = 3000
    columns = {
        "key": rng.integers(-3, 5, n),
        "pid": rng.integers(-40, 300_000, n),
        "op": rng.integers(0, 10_000_000, n),
        "mop_index": rng.integers(-1, 120, n),
    }
    for values in columns.values():
        values[rng.random(n) < 0.05] = NULL
    rows = list(zip(*(values.tolist() for values in columns.values()), range(n)))
    frame = spark.createDataFrame(rows, "key long, pid long, op long, mop_index long, row long").repartition(3)
    metrics = {}
    for name, values in columns.items():
        known = values[values != NULL]
        metrics[f"min_{name}"], metrics[f"max_{name}"] = int(known.min()), int(known.max())
    (packed,) = packed_order(metrics, passes.KEY_ORDER)  # about 3 + 19 + 24 + 7 bits: one number
    by_packed = frame.sortWithinPartitions(packed).rdd.glom().collect()
    by_columns = frame.sortWithinPartitions(*passes.KEY_ORDER).rdd.glom().collect()
    assert [[r["row"] for r in part] for part in by_packed] == [[r["row"] for r in part] for part in by_columns]
    wide = dict(metrics, min_op=-(2**40), max_op=2**40)  # 3 + 19 + 42 + 7 bits: the four columns
    assert packed_order(wide, passes.KEY_ORDER) == list(passes.KEY_ORDER)
    assert packed_order({}, passes.KEY_ORDER) == list(passes.KEY_ORDER)


def test_the_packed_order_puts_sql_nulls_first_too(spark):
    rng = np.random.default_rng(12)
    rows = [
        (int(k), None if rng.random() < 0.1 else int(v), i)
        for i, (k, v) in enumerate(zip(rng.integers(0, 64, 2000), rng.integers(-5, 1_000_000, 2000)))
    ]
    frame = spark.createDataFrame(rows, "key long, value long, row long").repartition(2)
    values = [v for _, v, _ in rows if v is not None]
    metrics = {"min_key": 0, "max_key": 63, "min_value": min(values), "max_value": max(values)}
    (packed,) = packed_order(metrics, ("key", "value"))
    by_packed = frame.sortWithinPartitions(packed, "row").rdd.glom().collect()
    by_columns = frame.sortWithinPartitions("key", "value", "row").rdd.glom().collect()
    assert [[r["row"] for r in part] for part in by_packed] == [[r["row"] for r in part] for part in by_columns]
