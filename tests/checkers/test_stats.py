"""results.json `stats`: counts, latency quantiles, timeseries and lag,
computed in Spark from a hand-written history whose figures we know."""

import math
import random

import pytest

from checkers.buckets import bucket_seconds
from checkers.load import load
from checkers.stats import compute_stats, latency_bin

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


def _exact(latencies, q):
    """The latency of rank ceil(q * n), what the histogram's quantile estimates."""
    ordered = sorted(latencies)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def test_a_quantile_at_a_bins_first_latency_is_that_latency(spark, tmp_path, write_run):
    # 1.000 and 1.003 ms share a bin: p50 (rank 1) is its smallest, p99 (rank 2) its largest.
    events = timed(op(0, "send", [send(0, 1, 0)]), 0, 0) + timed(op(1, "send", [send(0, 2, 1)]), 0, 0)
    events[1]["time"], events[3]["time"] = 1_000_000, 1_003_000
    t = load(write_run(tmp_path, events), spark)
    try:
        (row,) = compute_stats(t)["latency"]
    finally:
        t.release()
    assert (row["p50_ms"], row["p90_ms"], row["p99_ms"], row["max_ms"]) == (1.0, 1.003, 1.003, 1.003)


def test_quantiles_are_measured_latencies_within_a_bin_of_the_exact_ones(spark, tmp_path, write_run):
    # Latencies from 0 ns to about 100 s, some repeated, on two processes
    # over many time buckets: each quantile is a latency some op had, the
    # exact one or at most 1/128 above it.
    rng = random.Random(7)
    events, ops = [], []
    clock = {0: 0, 1: 0}
    for i in range(3000):
        if i % 7 == 0:
            latency = 1_000_000  # a repeated value
        elif i % 10 == 0:
            latency = rng.choice([0, 1, 7, 255, 256, 257, 1023, 1024])
        else:
            latency = int(10 ** rng.uniform(3, 11))
        process = i % 2
        invoke = clock[process]
        clock[process] = invoke + latency + 1
        events += [
            {"process": process, "type": "invoke", "f": "send", "mops": [send(0, i)], "time": invoke},
            {"process": process, "type": "ok", "f": "send", "mops": [send(0, i, i)], "time": invoke + latency},
        ]
        ops.append((invoke + latency, latency))
    events.sort(key=lambda e: e["time"])  # stable: a process's invoke stays before its completion
    t = load(write_run(tmp_path, events), spark)
    try:
        stats = compute_stats(t)
    finally:
        t.release()
    latencies = [latency for _, latency in ops]
    (row,) = stats["latency"]
    assert row["count"] == 3000 and row["max_ms"] == round(max(latencies) / MS, 3)
    for q, field in ((0.5, "p50_ms"), (0.9, "p90_ms"), (0.99, "p99_ms")):
        _assert_near(row[field], _exact(latencies, q), latencies)
    bucket_ns = stats["timeseries"]["bucket_s"] * 1e9
    series = {}
    for complete, latency in ops:
        series.setdefault(int(complete // bucket_ns), []).append(latency)
    rows = stats["timeseries"]["rows"]
    assert len(rows) == len(series) > 10
    for r in rows:
        values = series[round(r["t"] * 1e9 / bucket_ns)]
        assert r["count"] == len(values) and r["max_ms"] == round(max(values) / MS, 3)
        for q, field in ((0.5, "p50_ms"), (0.99, "p99_ms")):
            _assert_near(r[field], _exact(values, q), values)


def _assert_near(found_ms, exact, latencies):
    """A quantile in ms (rounded to 3 places) is a measured latency, the
    exact one or at most 1/128 above it."""
    measured = {round(v / MS, 3) for v in latencies if exact <= v <= exact * (1 + 1 / 128)}
    assert found_ms in measured, (found_ms, exact)


def test_a_latency_bin_spans_at_most_a_128th_of_its_values(spark):
    values = sorted(
        {0, 1, 255, 256, 257, 511, 512, 2**40 - 1, 2**40, 2**40 + 1}
        | {2**k + d for k in range(8, 62) for d in (-1, 0, 1)}
        | set(random.Random(3).sample(range(1, 2**50), 2000))
    )
    frame = spark.createDataFrame([(v,) for v in values], "latency long")
    rows = frame.select("latency", latency_bin().alias("bin")).collect()
    bins = {}
    for row in rows:
        bins.setdefault(row["bin"], []).append(row["latency"])
    order = sorted(rows, key=lambda r: r["latency"])
    assert all(a["bin"] <= b["bin"] for a, b in zip(order, order[1:]))  # bins keep the latencies' order
    for members in bins.values():
        assert max(members) - min(members) <= min(members) / 128
    assert all(r["bin"] == r["latency"] for r in rows if r["latency"] < 256)


@pytest.mark.parametrize(
    "duration, expected", [(0, 1.0), (2, 0.1), (60, 0.1), (61, 0.2), (300, 0.5), (3600, 10.0), (36000, 100.0)]
)
def test_bucket_keeps_at_most_600_buckets(duration, expected):
    assert bucket_seconds(duration) == expected
    assert duration / bucket_seconds(duration) <= 600
