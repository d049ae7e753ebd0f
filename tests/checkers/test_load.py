"""Loading a history: pairing in Spark, the shared facts, and one-line errors for bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from checker_histories import History, base_test, poll, send, write_run

from checkers import facts
from checkers import load as loading
from checkers.check import check_dir
from checkers.load import load, ops_with_mops
from ground.errors import GregorError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_checkers import generate  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def loaded(spark, tmp_path_factory):
    h = History()
    ids = {}
    ids["ok_send"] = h.op(0, "send", [send(0, 1, 0)])
    ids["info_read"] = h.op(1, "send", [send(0, 2)], type="info", error="_MSG_TIMED_OUT")
    ids["info_unread"] = h.op(5, "send", [send(0, 3)], type="info", error="_MSG_TIMED_OUT")
    ids["info_txn"] = h.op(2, "txn", [send(1, 10), send(2, 20)], type="info", txn_id="a")
    ids["info_plain"] = h.op(6, "send", [send(1, 11), send(2, 21)], type="info")
    ids["fail_send"] = h.op(3, "send", [send(3, 30)], type="fail", error="NOT_LEADER")
    ids["kill"] = h.nemesis("kill", {"killed": ["n2"]})
    # Offsets 0, 1, 3, 4: the gap at 2 is a transaction marker.
    ids["reader"] = h.op(
        4, "poll", [poll(0, 0, 1), poll(0, 1, 2), poll(1, 0, 10), poll(1, 1, 11), poll(0, 3, 4), poll(0, 4, 5)]
    )
    ids["cut"] = h.invoke(7, "poll", [{"f": "poll"}])
    t = load(h.write(tmp_path_factory.mktemp("loaded")), spark)
    return t, ids


def test_each_completion_pairs_with_its_invoke(loaded):
    t, ids = loaded
    ops = {row["op"]: row for row in t.ops.collect()}
    assert set(ops) == set(ids.values())
    ok = ops[ids["ok_send"]]
    assert (ok["invoke_index"], ok["type"], ok["invoke_time"], ok["complete_time"]) == (0, "ok", 0, 1000)
    assert ops[ids["fail_send"]]["error"] == "NOT_LEADER"
    assert json.loads(ops[ids["kill"]]["value_json"]) == {"killed": ["n2"]}


def test_invoke_without_completion_is_a_cut_short_info_op(loaded):
    t, ids = loaded
    cut = t.ops.where(f"op = {ids['cut']}").collect()[0]
    assert cut["type"] == "info" and cut["cut_short"] and cut["complete_time"] is None
    assert cut["invoke_index"] == ids["cut"]
    assert t.ops.where("cut_short").count() == 1


def test_mops_are_flattened_without_bare_polls(loaded):
    t, ids = loaded
    reads = t.mops.where(f"op = {ids['reader']}").orderBy("mop_index").collect()
    assert [(r["mf"], r["key"], r["offset"], r["value"]) for r in reads][:2] == [("poll", 0, 0, 1), ("poll", 0, 1, 2)]
    assert t.mops.where(f"op = {ids['cut']}").count() == 0


def test_must_have_happened_follows_the_ground_rules(loaded):
    t, ids = loaded
    must = {(r["key"], r["value"]) for r in facts.must_writes(t).collect()}
    assert (0, 1) in must  # ok send
    assert (0, 2) in must  # info send read by an ok op
    assert (0, 3) not in must  # info send no one read
    assert {(1, 10), (2, 20)} <= must  # info txn, one send read: the whole txn
    assert (1, 11) in must and (2, 21) not in must  # plain info op: send by send
    assert (3, 30) not in must  # fail send


def test_log_compacts_offset_gaps_to_dense_indices(loaded):
    t, _ = loaded
    log = {(r["offset"], r["index"]) for r in facts.log(t).where("key = 0").collect()}
    assert log == {(0, 0), (1, 1), (3, 2), (4, 3)}
    positions = {r["value"]: r["position"] for r in facts.positions(t).where("key = 0").collect()}
    assert positions == {1: 0, 2: 1, 4: 2, 5: 3}
    assert facts.read_bound(t).where("key = 0").collect()[0]["bound"] == 3


def _lines(events):
    return "".join(json.dumps(e) + "\n" for e in events)


GOOD = [
    {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "send", "mops": [send(0, 1)]},
    {"index": 1, "time": 5, "process": 0, "type": "ok", "f": "send", "mops": [send(0, 1, 0)]},
]


BAD_INPUTS = {
    "malformed-line": (_lines(GOOD) + '{"index": 2, "time": 6, "process": 0,\n', "line 3: malformed JSON"),
    "unknown-key": (_lines([GOOD[0], dict(GOOD[1], mops=[send(99, 1, 0)])]), "line 2: key 99 is not in test.json"),
    "missing-field": (_lines([GOOD[0], {k: v for k, v in GOOD[1].items() if k != "f"}]), 'line 2: missing "f"'),
    "wrong-type": (_lines([GOOD[0], dict(GOOD[1], time="soon")]), 'line 2: "time" must be an integer'),
    "non-contiguous-index": (_lines([GOOD[0], dict(GOOD[1], index=2)]), "line 2: index 2 where 1 was expected"),
    "completion-without-invoke": (
        _lines([GOOD[1] | {"index": 0}]),
        "line 1: a ok completion of process 0 with no invoke",
    ),
    "double-invoke": (_lines([GOOD[0], dict(GOOD[0], index=1)]), "line 1: process 0 invokes again at line 2"),
    "bad-type": (_lines([GOOD[0], dict(GOOD[1], type="done")]), 'line 2: "type" must be one of'),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_history_is_one_line_error_naming_the_line_and_nothing_is_written(spark, tmp_path, case):
    text, expected = BAD_INPUTS[case]
    (tmp_path / "history.jsonl").write_text(text)
    (tmp_path / "test.json").write_text(json.dumps(base_test()))
    with pytest.raises(GregorError) as error:
        check_dir(tmp_path, spark=spark, progress=lambda _: None)
    message = str(error.value)
    assert expected in message and "\n" not in message
    assert not (tmp_path / "results.json").exists()


def test_missing_test_json_is_an_error_and_nothing_is_written(spark, tmp_path):
    (tmp_path / "history.jsonl").write_text(_lines(GOOD))
    with pytest.raises(GregorError, match="test.json not found"):
        check_dir(tmp_path, spark=spark, progress=lambda _: None)
    assert not (tmp_path / "results.json").exists()


def test_good_history_loads(spark, tmp_path):
    t = load(write_run(tmp_path, GOOD), spark)
    assert t.ops.count() == 1 and t.mops.count() == 1


def test_a_last_line_torn_by_a_crash_is_left_out_and_the_run_is_cut_short(spark, tmp_path):
    read = [
        {"index": 2, "time": 6, "process": 1, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]},
        {"index": 3, "time": 9, "process": 1, "type": "ok", "f": "poll", "mops": [poll(0, 0, 1)]},
    ]
    torn = json.dumps(dict(GOOD[0], index=4, process=2))[:25]
    (tmp_path / "history.jsonl").write_text(_lines(GOOD + read) + torn)
    (tmp_path / "test.json").write_text(json.dumps(base_test()))
    said = []
    result = check_dir(tmp_path, spark=spark, progress=said.append)
    assert result["stats"]["events"] == 4 and result["cut_short"]
    assert not any(entry["count"] and not entry["allowed"] for entry in result["anomalies"].values())
    assert result["verdict"] == "unknown"
    assert any("cut off mid-write" in reason for reason in result["verdict_reasons"])
    assert any(f"last line ({len(torn)} bytes" in line for line in said)
    exported = ops_with_mops(spark, tmp_path).collect()
    assert sorted(row["op"] for row in exported) == [1, 3]


def test_an_unterminated_last_line_that_parses_is_an_event(spark, tmp_path):
    (tmp_path / "history.jsonl").write_text(_lines(GOOD).rstrip("\n"))
    t = load(tmp_path, spark, test=base_test())
    try:
        assert t.metrics["events"] == 2 and t.metrics["torn_tail"] == 0
        assert t.ops.count() == 1
    finally:
        t.release()


def test_a_torn_line_before_the_last_is_still_an_error(spark, tmp_path):
    torn = json.dumps(GOOD[1])[:20]
    (tmp_path / "history.jsonl").write_text(json.dumps(GOOD[0]) + "\n" + torn + "\n" + json.dumps(GOOD[1]))
    (tmp_path / "test.json").write_text(json.dumps(base_test()))
    with pytest.raises(GregorError, match="line 2: malformed JSON"):
        check_dir(tmp_path, spark=spark, progress=lambda _: None)


def _tasks_run(spark, action) -> int:
    """How many tasks `action`'s jobs ran (a stage Spark skipped runs none)."""
    sc = spark.sparkContext
    sc.setJobGroup("gregor-tasks-run", "tasks counted by a test")
    try:
        action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = [s for job in tracker.getJobIdsForGroup("gregor-tasks-run") for s in tracker.getJobInfo(job).stageIds]
    return sum(info.numCompletedTasks for info in map(tracker.getStageInfo, stages) if info is not None)


def _stored_mib(spark) -> float:
    return sum(i.memSize() + i.diskSize() for i in spark._jsc.sc().getRDDStorageInfo()) / 2**20


@pytest.mark.parametrize("on_disk", [False, True], ids=["in-memory", "disk-only"])
def test_the_table_is_stored_once_partitioned_by_route_and_freed_on_release(spark, tmp_path, monkeypatch, on_disk):
    """A small history's table is a stored copy; a large one's is the
    shuffle's own files, which no later job writes again."""
    generate(tmp_path, 20_000)
    if on_disk:  # as for a history above LARGE_HISTORY_BYTES
        monkeypatch.setattr(loading, "LARGE_HISTORY_BYTES", 0)
    before = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    baseline = _stored_mib(spark)  # tables other tests of this session still hold
    tables = load(tmp_path, spark)
    try:
        assert tables.storage == (loading.StorageLevel.DISK_ONLY if on_disk else loading.STORAGE)
        if on_disk:
            assert _stored_mib(spark) == baseline  # no copy of the shuffled rows
            # Read from the shuffle's files: a count runs a task per partition of the table
            # and one to add them up; the shuffle's map stage, a task per partition of the
            # history file, is not run again.
            assert _tasks_run(spark, lambda: tables.rows.count()) == tables.rows.rdd.getNumPartitions() + 1
        else:
            assert _stored_mib(spark) > baseline  # stored by the load's own job
        # A pass by route needs no shuffle: the stored table keeps its partitioning.
        by_route = tables.rows.groupBy("route").count()
        assert "Exchange" not in by_route._jdf.queryExecution().executedPlan().toString()
        assert by_route.count() > 1
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"  # set back after planning the table
        files = _block_files(spark, tables.rows)
        assert bool(files) == on_disk
    finally:
        tables.release()
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= before
    assert not [path for path in files if path.exists()]  # gone when release returns: `gregor check` exits then


def _block_files(spark, table) -> list:
    """The files of a stored table's blocks, or of the shuffle it reads, in Spark's local directories."""
    rdd = table._jdf.queryExecution().analyzed().rdd()
    shuffle = loading.read_shuffle(rdd)
    pattern = f"rdd_{rdd.id()}_*" if shuffle is None else f"shuffle_{shuffle}_*"
    roots = spark._jvm.org.apache.spark.util.Utils.getConfiguredLocalDirs(spark._jsc.sc().getConf())
    return [path for root in roots for path in Path(root).glob(f"blockmgr-*/*/{pattern}")]


def test_a_history_over_the_memory_limit_is_checked_on_disk_with_the_same_results(spark, tmp_path, monkeypatch):
    generate(tmp_path, 40_000)  # with the planted anomalies and a G1c cycle
    in_memory = check_dir(tmp_path, spark=spark, progress=lambda _: None)
    monkeypatch.setattr(loading, "LARGE_HISTORY_BYTES", 0)
    assert loading.storage_level(tmp_path / "history.jsonl") == loading.StorageLevel.DISK_ONLY
    on_disk = check_dir(tmp_path, spark=spark, progress=lambda _: None)
    for result in (in_memory, on_disk):
        result.pop("checker")
    assert {"G1c", "lost-write", "duplicate", "aborted-read"} <= set(on_disk["anomalies"])
    assert on_disk == in_memory


def test_release_waits_until_every_stored_table_is_freed(spark, tmp_path, monkeypatch):
    """Spark frees blocks on a pool of its own; a check that did not wait
    could end its process while a removal was under way, and the JVM then
    printed a RejectedExecutionException's stack trace after the results."""
    generate(tmp_path, 2_000)
    tables = load(tmp_path, spark)
    tables.cache["main"] = loading.stored_rows(tables.rows.limit(10), tables.storage)
    asked = []
    real = loading.free_rows
    monkeypatch.setattr(loading, "free_rows", lambda frame, wait=False: (asked.append(wait), real(frame, wait)))
    tables.release()
    assert asked == [True, True]


@pytest.mark.parametrize("partitions", [5, 130], ids=["one-word", "three-words"])
def test_the_load_names_the_partitions_that_hold_client_ops(spark, tmp_path, monkeypatch, partitions):
    """The metrics' bitmaps name exactly the stored table's partitions with a
    client op row (the nemesis's route is left out), over more than one
    64-bit word of them; the stats read those partitions alone and give
    what a read of the whole table gives."""
    from pyspark.sql import functions as F

    from checkers.history_format import NEMESIS
    from checkers.stats import compute_stats
    from checkers.table_format import OP_ROW

    generate(tmp_path, 4_000)
    size = (tmp_path / "history.jsonl").stat().st_size
    monkeypatch.setattr(loading, "BYTES_PER_PARTITION", -(-size // partitions))
    t = load(tmp_path, spark)
    try:
        count = t.rows.rdd.getNumPartitions()
        assert count >= partitions
        client_ops = t.rows.where((F.col("kind") == OP_ROW) & (F.col("process") != NEMESIS))
        holding = sorted({r["p"] for r in client_ops.select(F.spark_partition_id().alias("p")).collect()})
        assert t.metrics["op_partitions"] == holding
        assert 0 < len(holding) < count
        assert not [name for name in t.metrics if name.startswith(loading.OP_PARTS)]
        pruned = compute_stats(t)
        t.metrics["op_partitions"] = list(range(count))  # every partition: read whole
        assert compute_stats(t) == pruned
        assert pruned["ops"] > 0 and pruned["latency"]
    finally:
        t.release()
