"""A large key run in pieces gives the whole key's pass, row for row (issue 42).

The pass over one key of the 10M long-transaction history held 7.8M rows
in each of two Python workers. checkers/pieces.py writes such a key to
local files and runs it in pieces by value, by process order, and by the
chain of writers; these tests hold it to the pass over the key at once.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from history_shapes import generate  # noqa: E402

from checkers import passes, pieces  # noqa: E402
from checkers.arrays import NULL  # noqa: E402
from checkers.keypass import (  # noqa: E402
    ANOMALY,
    COVER,
    EDGE,
    EOS_COUNT,
    EOS_OUT,
    I_ALL,
    I_C,
    I_CWR,
    I_WR,
    INPUT_COLUMNS,
    LAG,
    LATE,
    NODE,
    ROUTE,
    SPAN,
    KeyPass,
    Params,
)
from checkers.table_format import COMMIT_ROW, FROM_ROW, OK_CODE, POLL_ROW, REBALANCE_ROW, SEND_ROW  # noqa: E402


def rows_of(parts) -> Counter:
    """The parts' rows as a multiset (list columns as tuples)."""
    out = Counter()
    for p in parts:
        for i in range(p["n"]):
            lists = tuple(
                sorted((name, tuple(flat[off[i] : off[i + 1]].tolist())) for name, (off, flat) in p["lists"].items())
            )
            columns = (int(p[c][i]) for c in ("key", "value", "offset", "time", "a", "b", "c", "d"))
            out[(int(p["tag"][i]), p["name"], *columns, lists)] += 1
    return out


def once_per_task(rows: Counter) -> Counter:
    """Nodes and routes count once (passes._unseen keeps them once per task)."""
    distinct = (NODE, ROUTE)
    return Counter({r: 1 for r in rows if r[0] in distinct}) + Counter(
        {r: n for r, n in rows.items() if r[0] not in distinct}
    )


def in_pieces(c: dict, params: Params, tmp_path, buckets: int, most: int, batch: int = 97) -> Counter:
    """The rows of the key `c` run in pieces: `buckets` by value, stretches
    and ranges of `most` rows, its rows cut into pieces `most` at a time."""
    spill = pieces.Spill(buckets, str(tmp_path))
    cut, pieces._CUT_ROWS = pieces._CUT_ROWS, most
    try:
        for start in range(0, len(c["key"]), batch):
            spill.add({name: values[start : start + batch] for name, values in c.items()})
        return rows_of(pieces.large_key_parts(spill, params, most))
    finally:
        pieces._CUT_ROWS = cut
        spill.remove()


@pytest.fixture(scope="module")
def shapes(spark, tmp_path_factory):
    """Each shape's pass input, sorted as passes.key_pass sorts it, and its main params."""
    from pyspark.sql import functions as F

    from checkers.load import load
    from checkers.table_format import KEY_KINDS

    out = {}
    for shape, events in (("longtxn", 3000), ("txn", 12000), ("eos", 12000), ("group", 12000)):
        directory = tmp_path_factory.mktemp(shape)
        generate(shape, directory, events)
        t = load(directory, spark)
        try:
            params = passes.main_params(t)
            table = t.rows.where(F.col("kind").isin(*KEY_KINDS)).selectExpr(*passes.INPUT_EXPRESSIONS).toArrow()
        finally:
            t.release()
        c = {name: table.column(name).to_numpy() for name in INPUT_COLUMNS}
        perm = np.lexsort((c["mop_index"], c["op"], c["pid"], c["key"]))
        out[shape] = ({name: values[perm] for name, values in c.items()}, params)
    return out


def _keys(c: dict):
    key = c["key"]
    bounds = np.r_[np.flatnonzero(np.r_[True, key[1:] != key[:-1]]), len(key)]
    for low, high in zip(bounds[:-1], bounds[1:]):
        yield {name: values[low:high] for name, values in c.items()}


def _cycle_params(params: Params) -> Params:
    everything = (np.array([-(1 << 62)]), np.array([1 << 62]))
    intervals = {family: everything for family in (I_CWR, I_C, I_WR, I_ALL)}
    return Params(mode="cycles", read_txns=params.read_txns, intervals=intervals, wide=everything)


@pytest.mark.spark
@pytest.mark.parametrize("shape", ["longtxn", "txn", "eos", "group"])
@pytest.mark.parametrize("mode", ["main", "cycles"])
def test_every_key_in_pieces_gives_the_rows_of_the_key_at_once(shapes, tmp_path, shape, mode):
    c, params = shapes[shape]
    if mode == "cycles":
        params = _cycle_params(params)
    tags = Counter()
    for key in _keys(c):
        whole = rows_of(KeyPass(key, params).run().parts)
        if mode == "cycles":
            whole = once_per_task(whole)
        for buckets, most in ((4, 50), (1, 1 << 20)):
            got = in_pieces(key, params, tmp_path, buckets, most)
            assert (once_per_task(got) if mode == "cycles" else got) == whole, (shape, mode, int(key["key"][0]))
        tags.update(row[0] for row in whole.elements())
    # what the shape's keys give, so the comparison is not of empty sets
    wanted = {"main": {COVER, LAG}, "cycles": {EDGE, NODE, ROUTE}}[mode]
    if mode == "main":
        wanted |= {"longtxn": {ANOMALY, SPAN}, "txn": {ANOMALY}, "eos": {EOS_COUNT, EOS_OUT}, "group": {ANOMALY}}[shape]
    assert wanted <= set(tags), tags


def _key(**columns) -> dict[str, np.ndarray]:
    n = len(next(iter(columns.values())))
    c = {name: np.full(n, NULL, dtype=np.int64) for name in INPUT_COLUMNS}
    c.update({name: np.asarray(values, dtype=np.int64) for name, values in columns.items()})
    for name in ("kind", "is_txn", "tcode", "reads"):
        c[name] = c[name].astype(np.int8)
    return c


def _polls(pid, ops, offsets, values, times, markers=()):
    """One process's `ok` reads of key 1: op i read offsets[i] (a list), its
    values; `markers`: ops whose rebalance names the key. Sorted as key_pass sorts."""
    rows = []
    for op, offs, vals, time in zip(ops, offsets, values, times):
        if op in markers:
            rows.append((REBALANCE_ROW, op, NULL, NULL, NULL, time))
        rows += [(POLL_ROW, op, i, o, v, time) for i, (o, v) in enumerate(zip(offs, vals))]
    kind, op, mop, offset, value, time = (list(x) for x in zip(*rows))
    n = len(kind)
    return dict(
        key=[1] * n,
        kind=kind,
        op=op,
        mop_index=mop,
        pid=[pid] * n,
        tcode=[OK_CODE] * n,
        is_txn=[0] * n,
        value=value,
        offset=offset,
        invoke_time=[t - 5 for t in time],
        complete_time=time,
        seg=[0] * n,
        reads=[1] * n,
    )


def test_order_steps_pair_across_stretches_with_rebalances_between(tmp_path):
    """Skips and backward reads whose pair straddles two stretches, with a
    rebalance between them in one case (no pair there), are found as in the
    key at once."""
    columns = _polls(
        pid=7,
        ops=[10, 11, 12, 13, 14, 15, 16],
        offsets=[[0, 1], [2, 4], [3], [5, 6], [8], [7], [9]],
        values=[[100, 101], [102, 104], [103], [105, 106], [108], [107], [109]],
        times=[100, 200, 300, 400, 500, 600, 700],
        markers=(15,),
    )
    c = _key(**columns)
    params = Params()
    whole = rows_of(KeyPass(c, params).run().parts)
    names = Counter(row[1] for row in whole.elements() if row[0] == ANOMALY)
    assert names["int-poll-skip"] == 1 and names["nonmonotonic-poll"] == 1 and names["poll-skip"] >= 1, names
    for most in (1, 2, 3, 5, 100):
        assert in_pieces(c, params, tmp_path, 3, most, batch=2) == whole


def test_a_spill_keeps_each_value_in_one_piece_with_its_ordinal_and_the_rows_in_order(tmp_path):
    c = _key(
        key=[1] * 6,
        kind=[SEND_ROW, POLL_ROW, FROM_ROW, COMMIT_ROW, SEND_ROW, POLL_ROW],
        value=[5, 5, NULL, NULL, 6, 6],
        from_value=[NULL, NULL, 5, NULL, NULL, NULL],
        op=[1, 2, 3, 4, 5, 6],
        pid=[1, 2, 3, 4, 5, 6],
    )
    spill = pieces.Spill(8, str(tmp_path))
    try:
        spill.add({name: values[:4] for name, values in c.items()})
        spill.add({name: values[4:] for name, values in c.items()})
        spill.close()
        stream = pieces.joined(list(spill.batches("stream")))
        assert stream["op"].tolist() == [1, 2, 3, 4, 5, 6]
        assert stream["kind"].dtype == np.int8
        got = {}
        for piece in spill.pieces():
            for ordinal, value, kind in zip(piece["_ordinal"], piece["value"], piece["kind"]):
                got[int(ordinal)] = (int(value), int(kind), id(piece))
        assert sorted(got) == list(range(6))
        # a marker goes with its input's value; a value's rows share one piece
        assert got[0][2] == got[1][2] == got[2][2]
        assert got[4][2] == got[5][2]
    finally:
        spill.remove()
    assert not spill.dir.exists()


def test_the_pieces_per_key_rows_merge_as_the_key_at_once_gives_them():
    def part(tag, n, **columns):
        p = {"tag": np.full(n, tag, np.int32), "name": None, "n": n, "lists": {}}
        for name in ("key", "value", "offset", "time", "a", "b", "c", "d"):
            p[name] = np.asarray(columns.get(name, [NULL] * n), dtype=np.int64)
        return p

    cover = [part(COVER, 1, key=[3]), part(COVER, 1, key=[3])]
    cover[0]["lists"] = {"values": (np.array([0, 2]), np.array([1, 8]))}
    cover[1]["lists"] = {"values": (np.array([0, 2]), np.array([2, 8]))}
    lag = [part(LAG, 2, key=[3, 3], a=[0, 1], b=[5, 9]), part(LAG, 1, key=[3], a=[0], b=[7])]
    counts = [part(EOS_COUNT, 1, a=[1], b=[0], c=[2]), part(EOS_COUNT, 1, a=[0], b=[4], c=[1])]
    merged = {int(p["tag"][0]): p for p in pieces._merge(cover + lag + counts)}
    assert merged[COVER]["lists"]["values"][1].tolist() == [3, 8]
    assert sorted(zip(merged[LAG]["a"].tolist(), merged[LAG]["b"].tolist())) == [(0, 7), (1, 9)]
    assert merged[LAG]["key"].tolist() == [3, 3]
    assert [int(merged[EOS_COUNT][n][0]) for n in "abc"] == [1, 4, 3]


def test_stretches_refuse_rows_out_of_process_order(tmp_path):
    c = _key(
        key=[1] * 4, kind=[POLL_ROW] * 4, pid=[1, 2, 1, 2], op=[1, 2, 3, 4], value=[1, 2, 3, 4], offset=[0, 1, 2, 3]
    )
    spill = pieces.Spill(2, str(tmp_path))
    try:
        spill.add(c)
        with pytest.raises(RuntimeError, match="process order"):
            list(pieces.large_key_parts(spill, Params(), 1 << 20))
    finally:
        spill.remove()


def _batches(columns: dict[str, np.ndarray], size: int) -> list[pa.RecordBatch]:
    n = len(columns["key"])
    return [
        pa.RecordBatch.from_arrays([pa.array(columns[name][i : i + size]) for name in INPUT_COLUMNS], INPUT_COLUMNS)
        for i in range(0, n, size)
    ]


def test_a_key_larger_than_asked_comes_as_files_and_the_others_as_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces.tempfile, "tempdir", str(tmp_path))
    keys = [1] * 3 + [2] * 9 + [3] * 2
    c = _key(key=keys, kind=[POLL_ROW] * len(keys), value=list(range(len(keys))))
    got = []
    for item in passes.streamed_key_chunks(iter(_batches(c, 4)), most=4, large=5):
        if isinstance(item, pieces.Spill):
            item.close()
            stream = pieces.joined(list(item.batches("stream")))
            got.append(("large", stream["key"].tolist(), stream["value"].tolist()))
            item.remove()
        else:
            got.append(("chunk", item["key"].tolist()))
    assert got == [("chunk", [1, 1, 1]), ("large", [2] * 9, list(range(3, 12))), ("chunk", [3, 3])]
    assert not list(tmp_path.glob("gregor-key-*"))


def test_a_failed_task_leaves_no_files_of_its_large_key(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces.tempfile, "tempdir", str(tmp_path))
    c = _key(key=[1] * 9, kind=[POLL_ROW] * 9, value=list(range(9)))

    def batches():
        yield from _batches(c, 4)[:2]
        raise OSError("the task was cut off")

    with pytest.raises(OSError, match="cut off"):
        list(passes.streamed_key_chunks(batches(), most=4, large=5))
    assert not list(tmp_path.glob("gregor-key-*"))


def test_an_info_transaction_read_in_one_piece_makes_its_sends_in_another_must_have_happened(tmp_path):
    """The run's read transactions (params.read_txns) left empty: the key's
    own pieces tell that the `info` transaction's send of value 2 was read,
    so its send of value 3, in another piece and never read, is unseen."""
    from checkers.table_format import INFO_CODE

    c = _key(
        key=[1] * 3,
        kind=[SEND_ROW, SEND_ROW, POLL_ROW],
        op=[5, 5, 9],
        mop_index=[0, 1, 0],
        pid=[1, 1, 2],
        is_txn=[1, 1, 0],
        tcode=[INFO_CODE, INFO_CODE, OK_CODE],
        value=[2, 3, 2],
        offset=[NULL, NULL, 0],
        invoke_time=[10, 10, 40],
        complete_time=[NULL, NULL, 50],
        n_sends=[2, 2, NULL],
        n_send_keys=[1, 1, NULL],
    )
    buckets = pieces.value_buckets(c, 64)
    assert buckets[0] != buckets[1]  # the two sends in two pieces
    whole = rows_of(KeyPass(c, Params()).run().parts)
    assert any(row[1] == "unseen" and row[3] == 3 for row in whole)
    assert in_pieces(c, Params(), tmp_path, 64, 1 << 20) == whole


def test_late_first_reads_in_pieces_count_from_the_whole_keys_previous_read(tmp_path):
    """stuck-lso's candidates (LATE rows) in pieces: a first read counts
    from the later of the value's acknowledgement and the reader's previous
    `ok` read of the key, which may be of a value in another piece; a read
    that completes just as the first read is invoked is not before it."""
    sends = _key(
        key=[1] * 6,
        kind=[SEND_ROW] * 6,
        op=[1, 2, 3, 4, 5, 6],
        mop_index=[0] * 6,
        pid=[1] * 6,
        is_txn=[0] * 6,
        tcode=[OK_CODE] * 6,
        value=[100, 101, 102, 103, 104, 105],
        offset=[0, 1, 2, 3, 4, 5],
        invoke_time=[0] * 6,
        complete_time=[10] * 6,
        n_sends=[1] * 6,
        n_send_keys=[1] * 6,
    )
    first = _key(
        **_polls(
            pid=7,
            ops=[20, 21, 22, 23, 24],
            offsets=[[0], [1], [2, 3], [4], [5]],
            values=[[100], [101], [102, 103], [104], [105]],
            times=[500, 560, 800, 900, 1100],
        )
    )
    second = _key(
        **_polls(
            pid=8,
            ops=[30, 31],
            offsets=[[0], [1, 2, 3, 4, 5]],
            values=[[100], [101, 102, 103, 104, 105]],
            times=[1995, 2000],
        )
    )
    c = {name: np.concatenate([sends[name], first[name], second[name]]) for name in sends}
    params = Params(timeout=100)
    whole = rows_of(KeyPass(c, params).run().parts)
    late = sorted((row[3], row[6], row[9]) for row in whole.elements() if row[0] == LATE)  # value, reader, since
    assert late == [
        (100, 7, 10),
        (100, 8, 10),
        (101, 8, 10),  # process 8's read of 100 completed at 1995, when this one was invoked
        (102, 7, 560),
        (102, 8, 10),
        (103, 7, 560),
        (103, 8, 10),
        (104, 8, 10),
        (105, 7, 900),
        (105, 8, 10),
    ], late
    for buckets, most in ((64, 1 << 20), (3, 2), (4, 5)):
        assert in_pieces(c, params, tmp_path, buckets, most, batch=3) == whole


@pytest.mark.spark
@pytest.mark.parametrize("shape", ["longtxn", "eos"])
def test_the_spark_pass_with_every_key_large_finds_the_rows_of_the_keys_at_once(spark, tmp_path, monkeypatch, shape):
    """passes.key_pass with every key run in pieces (4 by value, stretches
    and chain ranges of 50 rows) gives the rows it gives with every key at once, in both modes."""
    from checkers.load import load

    generate(shape, tmp_path, 3000)
    t = load(tmp_path, spark)
    try:
        main = passes.main_params(t)
        for params in (main, _cycle_params(main)):

            def rows(large, params=params):
                monkeypatch.setattr(pieces, "LARGE_KEY_ROWS", large)
                monkeypatch.setattr(pieces, "BUCKETS", 4)
                monkeypatch.setattr(pieces, "STRETCH_ROWS", 50)
                return Counter(map(repr, passes.key_pass(t, params).toArrow().to_pylist()))

            whole = rows(1 << 40)
            assert sum(whole.values()) > 100
            assert rows(1) == whole
    finally:
        t.release()


def test_a_large_keys_files_go_to_sparks_own_local_directory(tmp_path, monkeypatch):
    """Spark removes its local directory when its session ends, so even a
    task killed outright leaves no files of its large key behind."""
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path},/nonexistent")
    spill = pieces.Spill(2)
    try:
        assert spill.dir.parent == tmp_path
    finally:
        spill.remove()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/nonexistent")
    spill = pieces.Spill(2)
    try:
        assert str(spill.dir.parent) == pieces.tempfile.gettempdir()
    finally:
        spill.remove()


@pytest.mark.spark
@pytest.mark.parametrize("shape", ["longtxn", "txn"])
def test_a_large_keys_picture_in_pieces_is_the_picture_of_the_key_at_once(shapes, tmp_path, shape):
    """The picture mode (results.json's partitions) over a key in pieces: the
    same offsets near the named ones, with the same statuses, and the same
    count of the key's offsets; one key named at no offset of its log."""
    from checkers.keypass import PICTURE

    c, main = shapes[shape]
    keys = np.unique(c["key"])
    named_keys, named_offsets = [], []
    for key in keys[1:]:  # the first key is named at no offset of its log
        offsets = np.unique(c["offset"][(c["key"] == key) & (c["offset"] != NULL)])
        if len(offsets):
            named_keys += [int(key), int(key)]
            named_offsets += [int(offsets[len(offsets) // 2]), int(offsets[-1])]
    params = Params(
        mode="picture",
        read_txns=main.read_txns,
        picture_keys=keys,
        named_keys=np.array(named_keys, dtype=np.int64),
        named_offsets=np.array(named_offsets, dtype=np.int64),
        max_offsets=30,
        margin=5,
    )
    pictured = 0
    for key in _keys(c):
        whole = rows_of(KeyPass(key, params).run().parts)
        assert in_pieces(key, params, tmp_path, 4, 50) == whole
        pictured += sum(n for row, n in whole.items() if row[0] == PICTURE)
    assert pictured > 30 * len(keys) // 2
