"""The fast load (pyarrow parse, numpy rows) builds exactly the table the SQL load builds.

Each history is loaded both ways, with partitions of a few kilobytes so
that ops of every process straddle partition boundaries, and the two
tables must hold the same rows, column for column, and the same metrics.
Lines the fast load does not take fall back to the SQL load, whose one-line
errors test_load.py checks through the same `load`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from checker_histories import History, poll, send, write_run
from partition_scenarios import build
from pyspark.sql import functions as F
from txn_events import flatten, op
from txn_histories import init, valid_run

from checkers import eventparse, fastload
from checkers.fastload import fast_rows, parse_cache, summarize
from checkers.history_format import OK, TYPE_CODES
from checkers.load import history_path, known_keys, load, read_test
from checkers.table_format import PROBLEM_ROW

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_checkers import generate  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture
def small_partitions(spark):
    """Splits every history file into partitions of at most 2 kB while a test runs."""
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "2048")
    yield
    spark.conf.set(key, before)


def assert_same_table(spark, run: Path) -> None:
    keys = known_keys(read_test(run))
    assert fast_rows(spark, history_path(run), keys) is not None, "the fast load did not take a valid history"
    fast, sql = load(run, spark), load(run, spark, fast=False)
    try:

        def rows(t):
            return t.rows.selectExpr("*", "coalesce(_tight, false) as tight").drop("_tight")

        assert fast.rows.columns == sql.rows.columns
        assert rows(fast).exceptAll(rows(sql)).count() == 0
        assert rows(sql).exceptAll(rows(fast)).count() == 0
        assert fast.metrics == sql.metrics
    finally:
        fast.release()
        sql.release()


def varied_history() -> History:
    """Everything a line can carry: nemesis values of any JSON, a txn whose
    init names its txn_id only on the invoke, rebalances, copier inputs,
    processes that restart, and an invoke cut short at the end."""
    h = History()
    h.nemesis("partition", {"nodes": ["n1", "ñ2"], "ratio": 1.5e3, "nested": {"a": [1, None, True]}})
    h.events += [
        {"process": 3, "type": "invoke", "f": "init", "txn_id": "t"},
        {"process": 3, "type": "ok", "f": "init", "producer_id": 9, "epoch": 0},
    ]
    h.op(3, "txn", [send(0, 1, 0), send(1, 2, 0), send(1, 3, 1)], txn_id="t", epoch=0, producer_id=9, commit_time=7)
    h.op(4, "subscribe", [], keys=[0, 1], group="g")
    h.op(
        4,
        "poll",
        [poll(0, 0, 1), poll(1, 0, 2)],
        group="g",
        rebalance=[{"type": "assigned", "keys": [0, 1]}, {"type": "revoked", "keys": [1]}],
    )
    h.op(
        5,
        "txn",
        [
            poll(0, 0, 1),
            {"f": "send", "key": 2, "value": 101, "offset": 0, "from": [0, 1]},
            {"f": "commit", "key": 0, "offset": 1},
        ],
        txn_id="copy",
        group="c",
        commit_time=3,
    )
    h.nemesis("heal", "all")
    h.op(6, "send", [send(2, 5)], type="info", error='_MSG_TIMED_OUT "quoted"')
    h.op(7, "send", [send(2, 6, 2)], auto=True)
    h.invoke(6, "poll", [{"f": "poll"}])
    return h


HISTORIES = {
    "varied": lambda: varied_history().events,
    "partition-scenarios-present": lambda: build(True)[0].events,
    "partition-scenarios-absent": lambda: build(False)[0].events,
    "txn-run": lambda: valid_run(copier_duplicates=True),
    "fenced-instances": lambda: flatten(
        init(0, 0),
        op(0, "txn", [send(0, 1, 0)], txn_id="a", commit_time=1),
        init(1, 1),
        op(0, "txn", [send(0, 2)], type="fail", txn_id="a"),
    ),
    "only-the-nemesis": lambda: (
        History().events
        + [{"process": "nemesis", "type": "invoke", "f": "kill"}, {"process": "nemesis", "type": "info", "f": "kill"}]
    ),
}


@pytest.mark.parametrize("name", list(HISTORIES))
def test_fast_load_builds_the_sql_loads_table(spark, tmp_path, small_partitions, name):
    assert_same_table(spark, write_run(tmp_path, HISTORIES[name]()))


def test_fast_load_builds_the_sql_loads_table_on_a_generated_run(spark, tmp_path):
    generate(tmp_path, 20_000)
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "200000")  # about 15 partitions
    try:
        assert_same_table(spark, tmp_path)
    finally:
        spark.conf.set(key, before)


def test_an_empty_history_loads_the_same_both_ways(spark, tmp_path):
    run = write_run(tmp_path, [])
    assert load(run, spark).metrics == load(run, spark, fast=False).metrics


@pytest.mark.parametrize("case", ["unknown-key", "double-invoke", "completion-without-invoke"])
def test_a_history_the_fast_load_does_not_take_falls_back_and_is_named(spark, tmp_path, small_partitions, case):
    """A pairing broken across a partition boundary is caught by the fold, a
    bad mop by the second pass's parse when the first reads no mops (no
    parse cache, as here) and by the first when it parses in full (the
    load's parse cache); either way the SQL load names the line."""
    h = varied_history()
    events = [dict(e, index=i, time=1000 * i) for i, e in enumerate(h.events)]
    if case == "unknown-key":
        events[-2]["mops"] = [send(99, 6, 2)]
        expected = f"line {len(events) - 1}: key 99 is not in test.json"
    elif case == "double-invoke":
        events.insert(len(events) - 1, dict(events[-1]))
        expected = "invokes again at line"
    else:
        del events[4]  # the txn's invoke
        expected = "completion of process 3 with no invoke before it"
    events = [dict(e, index=i, time=1000 * i) for i, e in enumerate(events)]
    run = write_run(tmp_path, events)
    rows = fast_rows(spark, history_path(run), known_keys(read_test(run)))
    if case == "unknown-key":
        assert rows.where(F.col("kind") == PROBLEM_ROW).count() == 1
    else:
        assert rows is None
    with pytest.raises(Exception, match=expected):
        load(run, spark)


KNOWN = np.arange(8)


def _parse(*lines: str):
    return eventparse.parse(pa.array(list(lines), pa.string()), KNOWN)


GOOD = '{"index":0,"time":1,"process":2,"type":"invoke","f":"send","mops":[{"f":"send","key":1,"value":2}]}'


def test_parse_reads_client_and_nemesis_lines_in_line_order():
    nemesis = '{"index":1,"time":2,"process":"nemesis","type":"info","f":"kill","value":{"nodes":["n1"]}}'
    events = _parse(GOOD, nemesis, GOOD.replace('"index":0', '"index":2'))
    assert list(events.index) == [0, 1, 2]
    assert list(events.pid) == [2, -1, 2] and list(events.nemesis) == [False, True, False]
    assert events.table.column("text")[1].as_py() == nemesis


@pytest.mark.parametrize(
    "line",
    [
        "",  # blank
        "   ",
        GOOD.replace('"process":2', '"process":"2"'),  # Spark keeps the text
        GOOD.replace('"process":2', '"process":-3'),  # collides with the nemesis's number
        GOOD.replace('"time":1', '"time":1.0'),
        GOOD.replace('"time":1', '"time":1,"time":2'),  # a field given twice
        GOOD.replace('"key":1', '"key":99'),  # unknown key
        GOOD.replace('"value":2', '"value":null'),  # a send without a value
        GOOD.replace('"f":"send","key"', '"f":"peek","key"'),  # an unknown mop
        GOOD.replace('"type":"invoke"', '"type":"done"'),
        GOOD.replace(',"f":"send","mops"', ',"mops"'),  # no f
        GOOD.replace('"index":0', '"index":1'),  # index where 0 was expected is the caller's;
        GOOD[:-1],  # malformed
    ],
)
def test_parse_calls_suspect_what_it_does_not_take(line):
    lines = [line] if 'index":1' not in line else [GOOD, line, line]
    with pytest.raises(eventparse.Suspect):
        _parse(*lines)


def test_parse_takes_a_nemesis_value_of_any_json():
    line = json.dumps(
        {"index": 0, "time": 1, "process": "nemesis", "type": "info", "f": "x", "value": [1, "two", {"3": None}]}
    )
    assert len(_parse(line)) == 1


def test_the_first_pass_reads_less_and_sums_up_the_same():
    """summary_only skips the mops (the second pass reads and checks them),
    never a field the summaries use."""
    h = varied_history()
    lines = pa.array([json.dumps(dict(e, index=i, time=1000 * i)) for i, e in enumerate(h.events)], pa.string())
    full, light = eventparse.parse(lines, KNOWN), eventparse.parse(lines, KNOWN, summary_only=True)
    assert summarize(light, 0).equals(summarize(full, 0))
    assert summarize(full, 0).column("part_count")[0].as_py() == len(h.events)
    assert light.table.column("mops").null_count == len(h.events)
    bad_mop = GOOD.replace('"key":1', '"key":99')
    assert len(eventparse.parse(pa.array([bad_mop]), KNOWN, summary_only=True)) == 1
    with pytest.raises(eventparse.Suspect):
        eventparse.parse(pa.array([bad_mop]), KNOWN)
    with pytest.raises(eventparse.Suspect):
        eventparse.parse(pa.array([GOOD.replace('"process":2', '"process":"2"')]), KNOWN, summary_only=True)


def _folded(*parts: list[dict]) -> dict:
    """The fold of summaries of `parts`, each a partition of consecutive events."""
    tables, at = [], 0
    for partition, events in enumerate(parts):
        lines = [json.dumps(dict(e, index=at + i, time=1000 * (at + i))) for i, e in enumerate(events)]
        tables.append(summarize(eventparse.parse(pa.array(lines, pa.string()), KNOWN), partition))
        at += len(events)
    return fastload.fold(pa.concat_tables(tables))


def test_the_fold_carries_only_processes_that_cross_a_boundary():
    """A process whose events all lie in one partition needs nothing from the
    others (pass 2 treats a missing carry as the empty one); one that goes on
    in a later partition gets its last two events, resets and instance
    start there, and is told in the earlier one that it goes on."""
    alone = op(1, "subscribe", [], keys=[0], group="g")  # a reset, counted for process 1 alone
    begun = init(2, 0) + [op(2, "txn", [send(0, 2, 1)], txn_id="a", commit_time=1)[0]]  # an invoke left open
    ended = [op(2, "txn", [send(0, 2, 1)], txn_id="a", commit_time=1)[1]] + op(3, "send", [send(1, 3, 0)])
    carries = _folded(alone + begun, ended)
    assert set(carries[0]["processes"]) == {"2"} and carries[0]["processes"]["2"]["next"]
    crossing = carries[1]["processes"]["2"]
    assert not crossing["next"] and crossing["seg"] == 0
    assert crossing["last"]["type"] == eventparse.INVOKE_CODE and crossing["last"]["f"] == "txn"
    assert crossing["last2"]["f"] == "init" and crossing["init"]["epoch"] == 0
    assert set(carries[1]["processes"]) == {"2"}  # process 3 is in partition 1 only
    assert (carries[1]["first_index"], carries[1]["count"]) == (len(alone + begun), len(ended))


def test_the_fold_carries_a_process_through_a_partition_of_one_of_its_events():
    """Its init's invoke, its init's completion, then a txn, each in a partition
    of its own: the txn's partition gets both halves of the init, and the
    init as the instance's start, though neither is there."""
    invoke, completion = init(2, 5)
    carried = _folded([invoke], [completion], op(2, "txn", [send(0, 2, 1)], txn_id="a", commit_time=1))[2]
    carry = carried["processes"]["2"]
    assert (carry["last"]["f"], carry["last"]["type"]) == ("init", TYPE_CODES[OK])
    assert (carry["last2"]["f"], carry["last2"]["type"]) == ("init", eventparse.INVOKE_CODE)
    assert (carry["init"]["epoch"], carry["init"]["producer_id"]) == (5, 7)


def test_the_fold_turns_down_an_op_split_badly_across_partitions():
    invoke, completion = op(2, "send", [send(0, 2, 1)])
    assert _folded([invoke], [invoke, completion]) is None  # invokes again
    assert _folded([], [completion]) is None  # a completion with no invoke before it
    assert _folded([invoke], [dict(completion, f="poll")]) is None  # completes another f
    assert _folded([invoke], [completion]) is not None


def _same_rows(rows, expected) -> bool:
    """`rows` run on their own first: pass 2 finds its partition's carries by
    the task's partition id, which a union with other rows would shift."""
    rows = rows.localCheckpoint()
    return rows.exceptAll(expected).count() == 0 and expected.exceptAll(rows).count() == 0


def _junk_of_the_same_size(history: Path) -> None:
    """Every line replaced by an invalid one of the same length (so Spark's
    file splits stay the same): parsing this file again cannot give rows."""
    lines = history.read_bytes().split(b"\n")
    history.write_bytes(b"\n".join(b"x" * len(line) for line in lines))


def test_pass_two_reads_the_parse_pass_one_left_and_the_cache_goes_after(spark, tmp_path, small_partitions):
    run = write_run(tmp_path, varied_history().events)
    history, keys = history_path(run), known_keys(read_test(run))
    expected = fast_rows(spark, history, keys).localCheckpoint()
    with parse_cache(spark) as cache:
        rows = fast_rows(spark, history, keys, cache)  # pass 1 has run, pass 2 not yet
        partitions = spark.read.text(str(history)).rdd.getNumPartitions()
        assert partitions > 1
        assert sorted(Path(cache).iterdir()) == sorted(Path(cache) / f"{i}.arrow" for i in range(partitions))
        _junk_of_the_same_size(history)
        assert _same_rows(rows, expected)
    assert not Path(cache).exists()


def test_without_the_cache_pass_two_parses_the_file_again(spark, tmp_path, small_partitions):
    """The contrast to the test above: the same junk, no cache, a problem row
    (checkers/load.py then falls back to the SQL load)."""
    run = write_run(tmp_path, varied_history().events)
    rows = fast_rows(spark, history_path(run), known_keys(read_test(run)))
    _junk_of_the_same_size(history_path(run))
    assert rows.where(F.col("kind") == PROBLEM_ROW).count() >= 1


def test_a_partition_whose_cached_parse_is_gone_is_parsed_again(spark, tmp_path, small_partitions):
    run = write_run(tmp_path, varied_history().events)
    history, keys = history_path(run), known_keys(read_test(run))
    expected = fast_rows(spark, history, keys).localCheckpoint()
    with parse_cache(spark) as cache:
        rows = fast_rows(spark, history, keys, cache)
        (Path(cache) / "0.arrow").unlink()
        (Path(cache) / "1.arrow").write_bytes(b"torn")
        assert _same_rows(rows, expected)


def test_the_parse_cache_is_for_local_mode_only():
    """In a cluster pass 2 may run on another host, where pass 1's files
    would be missing and left behind."""

    class Context:
        master = "spark://10.0.0.1:7077"

    class Session:
        sparkContext = Context()

    with parse_cache(Session()) as cache:
        assert cache is None


def test_line_ranges_cover_the_file_and_end_after_newlines(tmp_path):
    path = tmp_path / "lines"
    lines = [b"a" * n for n in (0, 1, 5, 40, 3, 3, 100, 2)]
    for tail in (b"\n", b""):
        path.write_bytes(b"\n".join(lines) + tail)
        data = path.read_bytes()
        for split in (1, 4, 10, 64, 1000):
            ranges = fastload.line_ranges(path, split, chunk=7)
            assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            assert all(data[end - 1 : end] == b"\n" for _, end in ranges[:-1])
            # a range ends at the first newline at or after `split` bytes
            assert all(data.find(b"\n", start + split - 1) + 1 == end for start, end in ranges[:-1])
    path.write_bytes(b"")
    assert fastload.line_ranges(path, 10) == [(0, 0)]


@pytest.mark.parametrize("content", [b'{"a":1}\n{"b":"\xc3\xb1"}\n', b'{"a":1}\n\n{"c":3}', b"\n\n", b"x"])
def test_read_lines_gives_the_lines_sparks_text_reader_gives(spark, tmp_path, content):
    path = tmp_path / "history.jsonl"
    path.write_bytes(content)
    expected = [row["value"] for row in spark.read.text(str(path)).collect()]
    ranges = fastload.line_ranges(path, 3)
    assert [
        line for start, end in ranges for line in fastload.read_lines(str(path), start, end).to_pylist()
    ] == expected


def test_read_lines_does_not_take_a_carriage_return_or_a_range_inside_a_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'{"a":1}\r\n{"b":2}\n')
    with pytest.raises(eventparse.Suspect, match="carriage return"):
        fastload.read_lines(str(path), 0, path.stat().st_size)
    path.write_bytes(b'{"a":1}\n{"b":2}\n')
    with pytest.raises(eventparse.Suspect, match="does not start a line"):
        fastload.read_lines(str(path), 3, path.stat().st_size)


def test_spark_reading_the_file_builds_the_same_rows(spark, tmp_path):
    """Outside local mode Spark's text reader feeds both passes (and there is
    no parse cache): the rows are the same as the tasks' own reads give."""
    generate(tmp_path, 5_000)
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "100000")
    try:
        history, keys = history_path(tmp_path), known_keys(read_test(tmp_path))
        assert fastload.file_input(spark, history, local_files=False).partitions > 1
        expected = fast_rows(spark, history, keys, local_files=False).localCheckpoint()
        with parse_cache(spark) as cache:
            assert _same_rows(fast_rows(spark, history, keys, cache), expected)
            assert len(list(Path(cache).iterdir())) == fastload.file_input(spark, history).partitions
    finally:
        spark.conf.set(key, before)


def test_a_parse_that_cannot_be_saved_is_only_not_cached(tmp_path):
    """A full or missing scratch disk costs pass 2 its parse, never the load."""
    events = eventparse.parse(pa.array([GOOD]), KNOWN)
    gone = tmp_path / "gone"
    fastload._save_parse(str(gone), 0, events.table)
    assert not gone.exists() and fastload._saved_parse(str(gone), 0) is None
    fastload._save_parse(str(tmp_path), 0, events.table)
    assert fastload._saved_parse(str(tmp_path), 0).table.equals(events.table)
    assert [p.name for p in tmp_path.iterdir()] == ["0.arrow"]
