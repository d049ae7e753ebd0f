"""results.json `stats`: counts, latency quantiles, timeseries and lag,
computed in Spark from a hand-written history whose figures we know."""

import pytest

from checkers import stats as stats_module
from checkers.buckets import bucket_seconds
from checkers.load import load
from checkers.stats import HASH_GROUPS_CONF, compute_stats

pytestmark = pytest.mark.spark

MS = 1_000_000


def send(key, value, offset=None):
    mop = {"f": "send", "key": key, "value": value}
    if offset is not None:
        mop["offset"] = offset
    return mop


def poll(key, offset, value):
    return {"f": "poll", "key": key, "offset": offset, "value": value}


def op(process, f, mops, type="ok"):
    invoke_mops = [
        {"f": "send", "key": m["key"], "value": m["value"]} if m["f"] == "send" else {"f": "poll"} for m in mops
    ]
    return [
        {"process": process, "type": "invoke", "f": f, "mops": invoke_mops},
        {"process": process, "type": type, "f": f, "mops": mops},
    ]


def timed(pair, invoke_ms, complete_ms):
    invoke, completion = pair
    return [dict(invoke, time=invoke_ms * MS), dict(completion, time=complete_ms * MS)]


def history():
    events = []
    events += timed(op(0, "send", [send(0, 1, 0)]), 0, 10)  # ok send, 10 ms
    events += timed(op(1, "send", [send(0, 2)], type="info"), 5, 25)  # info send, 20 ms
    events += timed(op(0, "send", [send(1, 3)], type="fail"), 30, 31)  # fail send, 1 ms
    events += timed(op(2, "poll", [poll(0, 0, 1)]), 40, 1540)  # reads value 1 at 1.54 s
    events += [
        {"process": "nemesis", "type": "invoke", "f": "kill", "time": 50 * MS},
        {"process": "nemesis", "type": "info", "f": "kill", "value": {"killed": ["n1"]}, "time": 60 * MS},
    ]
    events += [{"process": 3, "type": "invoke", "f": "send", "mops": [send(1, 4)], "time": 2000 * MS}]  # cut short
    return events


def test_counts_latency_and_lag(spark, tmp_path, write_run):
    t = load(write_run(tmp_path, history()), spark)
    stats = compute_stats(t)
    assert (stats["ops"], stats["ok"], stats["info"], stats["fail"]) == (5, 2, 2, 1)
    assert stats["events"] == 11
    assert stats["duration_s"] == 2.0
    assert stats["by_f"] == {"poll": {"ok": 1, "fail": 0, "info": 0}, "send": {"ok": 1, "fail": 1, "info": 2}}
    latency = {(r["f"], r["type"]): r for r in stats["latency"]}
    assert set(latency) == {("send", "ok"), ("send", "info"), ("send", "fail"), ("poll", "ok")}
    assert latency[("send", "ok")]["p50_ms"] == 10.0 and latency[("send", "ok")]["max_ms"] == 10.0
    assert latency[("send", "info")]["count"] == 1  # the cut-short op has no latency
    assert latency[("poll", "ok")]["p99_ms"] == 1500.0
    series = stats["timeseries"]
    assert series["bucket_s"] == 0.1
    poll_row = [r for r in series["rows"] if r["f"] == "poll"]
    assert poll_row == [
        {"t": 1.5, "f": "poll", "type": "ok", "count": 1, "p50_ms": 1500.0, "p99_ms": 1500.0, "max_ms": 1500.0}
    ]
    assert sum(r["count"] for r in series["rows"]) == 4
    assert stats["lag"]["rows"] == [{"t": 1.5, "key": 0, "lag_ms": 1530.0}]


def test_quantiles_over_many_ops(spark, tmp_path, write_run):
    events = []
    for i in range(100):  # latencies 1..100 ms, one op per process
        events += timed(op(i, "send", [send(0, i, i)]), i * 10, i * 10 + i + 1)
    t = load(write_run(tmp_path, events), spark)
    latency = compute_stats(t)["latency"]
    assert len(latency) == 1
    row = latency[0]
    assert row["count"] == 100
    assert row["p50_ms"] == 50.0 and row["p90_ms"] == 90.0 and row["p99_ms"] == 99.0
    assert row["max_ms"] == 100.0


def test_many_groups_by_hash_give_what_the_sort_gives(spark, tmp_path, write_run, monkeypatch):
    # 300 ops of one process (so one task) over 60 s: 300 time buckets of
    # 0.1 s, past the 128 groups per task after which Spark would sort.
    events = []
    for i in range(300):
        events += timed(op(0, "send", [send(i % 3, i, i // 3)]), i * 200, i * 200 + 1 + i % 11)
    key = HASH_GROUPS_CONF[0]
    before = spark.conf.get(key, None)
    t = load(write_run(tmp_path, events), spark)
    try:
        by_hash = compute_stats(t)
        assert spark.conf.get(key, None) == before
        monkeypatch.setattr(stats_module, "HASH_GROUPS_CONF", (key, "128"))
        by_sort = compute_stats(t)
    finally:
        t.release()
    assert len(by_hash["timeseries"]["rows"]) == 300
    assert by_hash == by_sort


@pytest.mark.parametrize(
    "duration, expected", [(0, 1.0), (2, 0.1), (60, 0.1), (61, 0.2), (300, 0.5), (3600, 10.0), (36000, 100.0)]
)
def test_bucket_keeps_at_most_600_buckets(duration, expected):
    assert bucket_seconds(duration) == expected
    assert duration / bucket_seconds(duration) <= 600
