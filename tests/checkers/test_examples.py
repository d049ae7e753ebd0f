"""Examples chosen per partition and merged on the driver: the same counts,
first examples and named offsets as ranking every anomaly row at once."""

import random

import numpy as np
from checker_histories import History, poll, send
from pyspark.sql import Window
from pyspark.sql import functions as F

from checkers import passes
from checkers.arrays import NULL
from checkers.examples import example_key, merge_summaries, part_row, partition_summary
from checkers.load import load

EXAMPLE, TALLY, NAMED = 101, 102, 103
NAMES = ("duplicate", "lost-write", "poll-skip")


def _maybe(rng, low, high, nulls=0.2):
    return None if rng.random() < nulls else rng.randint(low, high)


def _anomalies(rng, n):
    """Rows with many ties on the scalar columns, so lists decide the order."""
    rows = []
    for _ in range(n):
        rows.append(
            {
                "name": rng.choice(NAMES),
                "time": _maybe(rng, 1, 4),
                "key": _maybe(rng, 0, 2),
                "value": _maybe(rng, 0, 2),
                "offset": _maybe(rng, 0, 3),
                "offsets": None if rng.random() < 0.3 else [rng.randint(0, 5) for _ in range(rng.randint(0, 3))],
                "values": None if rng.random() < 0.5 else [rng.randint(0, 2) for _ in range(rng.randint(0, 2))],
                "ops": [rng.randint(0, 9) for _ in range(rng.randint(1, 3))],
            }
        )
    return rows


def _lists(rows, column):
    lengths = [len(r[column] or []) for r in rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, np.array([v for r in rows for v in (r[column] or [])], dtype=np.int64)


def _parts(rows):
    """keypass.Rows parts of these rows, one per name and list shape (a part
    has a list column for all its rows or for none, as the pass's parts do)."""
    parts = []
    groups = {}
    for row in rows:
        groups.setdefault((row["name"], row["offsets"] is None, row["values"] is None), []).append(row)
    for (name, no_offsets, no_values), group in groups.items():
        part = {"tag": np.zeros(len(group), np.int32), "name": name, "n": len(group), "lists": {}}
        for column in ("key", "value", "offset", "time", "a", "b", "c", "d"):
            part[column] = np.array([NULL if r.get(column) is None else r[column] for r in group], np.int64)
        part["lists"]["ops"] = _lists(group, "ops")
        if not no_offsets:
            part["lists"]["offsets"] = _lists(group, "offsets")
        if not no_values:
            part["lists"]["values"] = _lists(group, "values")
        parts.append(part)
    return parts


def _as_rows(parts):
    """Summary parts back to dicts, as the driver reads them."""
    rows = []
    for part in parts:
        for i in range(part["n"]):
            row = {
                "tag": int(part["tag"][i]),
                "name": part["name"],
                **part_row(part, i, ("key", "value", "offset", "time", "a")),
            }
            rows.append(row)
    return rows


def _summarized(partitions, keep):
    rows = []
    for partition in partitions:
        rows += _as_rows(partition_summary(_parts(partition), keep, (EXAMPLE, TALLY, NAMED)))
    by_tag = {tag: [r for r in rows if r["tag"] == tag] for tag in (EXAMPLE, TALLY, NAMED)}
    return merge_summaries(by_tag[TALLY], by_tag[EXAMPLE], by_tag[NAMED], keep)


def _lowest_named(rows):
    lowest = {}
    for row in rows:
        if row["key"] is None:
            continue
        candidates = [v for v in [row["offset"], min(row["offsets"]) if row["offsets"] else None] if v is not None]
        low = min(candidates) if candidates else None
        if lowest.get(row["key"]) is None:
            lowest[row["key"]] = low
        elif low is not None:
            lowest[row["key"]] = min(lowest[row["key"]], low)
    return lowest


def _fields(row):
    return {c: row[c] for c in ("name", "time", "key", "value", "offset", "offsets", "values", "ops")}


def test_partitions_merged_give_the_first_examples_of_all_rows():
    rng = random.Random(7)
    for trial in range(40):
        rows = _anomalies(rng, rng.randint(1, 60))
        cut = sorted(rng.sample(range(len(rows) + 1), min(3, len(rows) + 1)))
        partitions = [rows[a:b] for a, b in zip([0] + cut, cut + [len(rows)])]
        keep = rng.choice([1, 2, 5, 50])
        counts, examples, named = _summarized([p for p in partitions if p], keep)
        for name in NAMES:
            mine = [r for r in rows if r["name"] == name]
            assert counts.get(name, 0) == len(mine)
            want = [example_key(r) for r in sorted(mine, key=example_key)[:keep]]
            assert [example_key(r) for r in examples.get(name, [])] == want, (trial, name)
        assert named == _lowest_named(rows)


def test_the_order_is_sparks(spark):
    """example_key sorts rows as passes.example_order sorts them in Spark,
    nulls and lists included."""
    rng = random.Random(3)
    rows = [_fields(r) for r in _anomalies(rng, 200)]
    frame = spark.createDataFrame(
        rows,
        "name string, time long, key long, value long, offset long, "
        "offsets array<long>, values array<long>, ops array<long>",
    )
    ranked = (
        frame.select("*", F.row_number().over(Window.orderBy(*passes.example_order())).alias("n"))
        .orderBy("n")
        .collect()
    )
    spark_keys = [example_key(r.asDict()) for r in ranked]
    assert spark_keys == sorted(example_key(r) for r in rows)


def test_a_check_keeps_its_examples_when_asked_for_more_later(spark, tmp_path):
    """The stored main pass kept one example per name; asking for more runs it again."""
    h = History()
    for value in range(4):
        h.op(0, "send", [send(0, value, offset=value)])
    h.op(1, "poll", [poll(0, offset, offset % 4) for offset in range(8)])  # each value at two offsets
    before = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    t = load(h.write(tmp_path), spark)
    try:
        passes.small(t)
        counts, examples = passes.collect(t, 3)
        assert counts["duplicate"] == 4
        assert [e["value"] for e in examples["duplicate"]] == [0, 1, 2]
    finally:
        t.release()
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= before  # the first pass's too
