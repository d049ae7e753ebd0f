"""torn-transaction and zombie-write, plus no false alarm from any transactional finder on a valid run."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from txn_events import flatten, op, poll, send
from txn_histories import init, op_with_value, valid_run

from checkers import cycles, eos, groups, liveness, txn
from checkers.load import load

pytestmark = pytest.mark.spark


def rows(finder, spark, tmp_path, write_run, events, test=None):
    return finder.find(load(write_run(tmp_path, events, test), spark)).collect()


def test_valid_run_with_aborts_unread_info_and_marker_gaps_raises_nothing(spark, tmp_path, write_run):
    t = load(write_run(tmp_path, valid_run()), spark)
    for finder in (txn, eos, groups, liveness, cycles):
        found = [(r["name"], r["key"], r["value"]) for r in finder.find(t).collect()]
        assert found == [], f"{finder.__name__}: {found}"


def test_torn_transaction_names_the_unread_write(spark, tmp_path, write_run):
    events = valid_run(reader_misses_v8=True, group_misses_v8=True)
    found = rows(txn, spark, tmp_path, write_run, events)
    assert [(r["name"], r["key"], r["value"], r["offset"], r["ops"], r["values"]) for r in found] == [
        ("torn-transaction", 1, 8, 2, [op_with_value(events, 7)], [7])
    ]


def test_torn_transaction_waits_for_a_complete_drain(spark, tmp_path, write_run, base_test):
    events = valid_run(reader_misses_v8=True, group_misses_v8=True)
    test = base_test(drain={"complete": False})
    assert rows(txn, spark, tmp_path, write_run, events, test) == []


def zombie_run(commit_time):
    """p0's epoch-0 txn commits at ``commit_time``; p4's init (epoch 1) completes at index 3 (time 3000)."""
    return flatten(
        init(0, 0),  # 0, 1
        init(4, 1),  # 2, 3
        op(
            0, "txn", [send(0, 1, 0), send(1, 2, 0)], txn_id="a", epoch=0, producer_id=7, commit_time=commit_time
        ),  # 4, 5
        op(1, "poll", [poll(0, 0, 1), poll(1, 0, 2)]),  # 6, 7
    )


def test_zombie_write_after_the_newer_init(spark, tmp_path, write_run):
    found = rows(txn, spark, tmp_path, write_run, zombie_run(4500))
    assert [(r["name"], r["key"], r["value"], r["offset"], r["values"], r["ops"]) for r in found] == [
        ("zombie-write", 0, 1, 0, [1, 2], [5, 3])
    ]


def test_no_zombie_when_committed_before_the_newer_init(spark, tmp_path, write_run):
    assert rows(txn, spark, tmp_path, write_run, zombie_run(2500)) == []


def test_zombie_epoch_taken_from_the_process_last_init(spark, tmp_path, write_run):
    """An info txn without epoch, read by someone, belongs to its process's epoch-0 instance."""
    events = flatten(
        init(0, 0),
        init(4, 1),
        op(0, "txn", [send(0, 1), send(1, 2)], type="info", txn_id="a", commit_time=4500),
        op(1, "poll", [poll(0, 0, 1)]),
    )
    found = rows(txn, spark, tmp_path, write_run, events)
    zombies = [r for r in found if r["name"] == "zombie-write"]
    assert [(r["key"], r["value"], r["ops"]) for r in zombies] == [(0, 1, [5, 3])]


def test_cross_key_facts_read_the_table_and_store_nothing(spark, tmp_path, write_run):
    """The facts read the loaded table where it is: what they find is the
    read info transaction and its fencing, and nothing of theirs stays
    stored after."""
    from checkers import passes

    events = flatten(
        init(0, 0),
        init(4, 1),
        op(0, "txn", [send(0, 1), send(1, 2)], type="info", txn_id="a", commit_time=4500),
        op(1, "poll", [poll(0, 0, 1)]),
    )
    t = load(write_run(tmp_path, events), spark)
    try:
        t.rows.count()  # the checkpoint is stored by its first job
        own = t.rows._jdf.queryExecution().analyzed().rdd().id()
        stored = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
        facts = passes.cross_key_facts(t)
        after = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
        # Spark's cleaner may free an earlier test's dropped table meanwhile
        # (CI saw one go), so: nothing new stays, and the run's own table does.
        assert own in stored and own in after and after <= stored
    finally:
        t.release()
    assert facts["read_txns"] == {5}
    assert [(f["op"], f["init_op"], f["commit_time"], f["type"]) for f in facts["fenced"]] == [(5, 3, 4500, "info")]
    assert facts["copier_groups"] == set()


def test_fencing_takes_the_windows_when_the_inits_would_not_fit_the_driver(spark, tmp_path, write_run, monkeypatch):
    """The inits come to the driver only when the load's count of them fits
    (checkers/spark.py's share of the heap); past it, the windows answer the same."""
    from checkers import fencing
    from checkers.table_format import OP_ROW

    events = flatten(
        init(0, 0),
        init(4, 1),
        op(0, "txn", [send(0, 1), send(1, 2)], type="info", txn_id="a", commit_time=4500),
    )
    t = load(write_run(tmp_path, events), spark)
    try:
        ops = t.rows.where(F.col("kind") == OP_ROW)
        small = fencing.fenced(ops, 2)
        monkeypatch.setattr(fencing, "by_lookup", lambda ops: pytest.fail("the inits were brought to the driver"))
        large = fencing.fenced(ops, 10**12)
    finally:
        t.release()
    assert small == large == [{"op": 5, "type": "info", "commit_time": 4500, "init_op": 3}]


def test_unread_info_zombie_is_no_zombie(spark, tmp_path, write_run):
    events = flatten(
        init(0, 0),
        init(4, 1),
        op(0, "txn", [send(0, 1), send(1, 2)], type="info", txn_id="a", commit_time=4500),
    )
    assert rows(txn, spark, tmp_path, write_run, events) == []


def _pairwise_fenced(inits, txns):
    """The definition, pair by pair: per transaction the earliest (completion,
    op) `ok` init of its id with a higher epoch, a compatible producer id and
    a completion before the commit."""
    out = set()
    for op_, txn_id, type_, commit_time, epoch, pid in txns:
        newer = [
            (done, init_op)
            for txn_id_i, pid_i, epoch_i, done, init_op in inits
            if txn_id_i == txn_id
            and epoch_i > epoch
            and done < commit_time
            and (pid_i is None or pid is None or pid_i == pid)
        ]
        if newer:
            out.add((op_, type_, commit_time, min(newer)[1]))
    return out


@pytest.mark.parametrize("way", ["lookup", "windows"])
@pytest.mark.parametrize("seed", range(4))
def test_fencing_finds_what_the_pairwise_definition_finds(spark, seed, way):
    """checkers/fencing.py answers per (id, producer id, epoch), by arrays of
    the inits or by windows in Spark; on random ops (epochs going up and
    down, producer ids known or not, equal times, ids no init has) each way
    must find exactly the pairs the definition does."""
    import random

    from checkers import fencing
    from checkers.load import OP_COLUMNS

    rng = random.Random(seed)
    inits, txns, rows_ = [], [], []
    for number in range(400):
        txn_id = rng.choice(["a", "b", "c", "d"])
        pid = rng.choice([None, 1, 2])
        epoch = rng.randrange(6)
        done = rng.randrange(60)
        row = dict.fromkeys(OP_COLUMNS)
        row.update(op=number, txn_id=txn_id, complete_time=done)
        if rng.random() < 0.3:
            kinds = ["info"] if txn_id == "d" else ["ok", "ok", "info"]  # d: an id no `ok` init has
            row.update(f="init", type=rng.choice(kinds), epoch=epoch, producer_id=pid)
            if row["type"] == "ok":
                inits.append((txn_id, pid, epoch, done, number))
        else:
            own = rng.random() < 0.3  # the epoch known from the process's last init only
            row.update(f="txn", type=rng.choice(["ok", "info", "fail"]), commit_time=rng.randrange(80))
            row.update(own_epoch=epoch, own_producer_id=pid) if own else row.update(epoch=epoch, producer_id=pid)
            txns.append((number, txn_id, row["type"], row["commit_time"], epoch, pid))
        rows_.append(row)
    schema = ", ".join(
        f"`{c}` {'string' if c in ('process', 'f', 'type', 'error', 'txn_id', 'group', 'value_json') else 'long'}"
        for c in OP_COLUMNS
        if c not in ("auto", "keys", "rebalance", "cut_short", "reads")
    )
    frame = spark.createDataFrame(
        [{k: v for k, v in r.items() if k not in ("auto", "keys", "rebalance", "cut_short", "reads")} for r in rows_],
        schema,
    )
    fenced = fencing.by_lookup(frame) if way == "lookup" else [r.asDict() for r in fencing.by_windows(frame).collect()]
    found = {(r["op"], r["type"], r["commit_time"], r["init_op"]) for r in fenced}
    expected = _pairwise_fenced(inits, txns)
    assert expected, "the random ops hold fenced transactions"
    assert found == expected
