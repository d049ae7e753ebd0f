"""checkers/reads.py: which sends an ok poll read, found within each key's partition."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from checkers.reads import ReadSends


def _rows(rng: random.Random, n: int) -> list[tuple[bool, int, int, int]]:
    """(send, op, key, value) rows sorted by (key, value), few values so that pairs repeat."""
    rows = [(rng.random() < 0.5, rng.randrange(40), rng.randrange(3), rng.randrange(12)) for _ in range(n)]
    return sorted(rows, key=lambda r: (r[2], r[3]))


def _expected(rows, ops) -> Counter:
    polled = {(k, v) for send, _, k, v in rows if not send}
    return Counter((op, k, v) for send, op, k, v in rows if send and (k, v) in polled and (ops is None or op in ops))


def _walked(rows, cuts: list[int], ops) -> Counter:
    walk = ReadSends(None if ops is None else np.array(sorted(ops), dtype=np.int64))
    found = Counter()
    bounds = [0, *cuts, len(rows)]
    for low, high in zip(bounds[:-1], bounds[1:]):
        part = rows[low:high]
        if not part:
            continue
        columns = {
            name: np.array([r[i] for r in part], dtype=bool if name == "send" else np.int64)
            for i, name in enumerate(("send", "op", "key", "value"))
        }
        out = walk.feed(columns)
        found.update(zip(out["op"].tolist(), out["key"].tolist(), out["value"].tolist()))
    out = walk.close()
    found.update(zip(out["op"].tolist(), out["key"].tolist(), out["value"].tolist()))
    return found


@pytest.mark.parametrize("seed", range(40))
def test_walk_gives_the_read_sends_however_the_rows_are_cut(seed):
    """Batches cut anywhere, also inside one (key, value) and one row at a
    time, give exactly the sends whose (key, value) some ok poll read."""
    rng = random.Random(seed)
    rows = _rows(rng, rng.randrange(1, 120))
    ops = None if seed % 2 else set(rng.sample(range(40), 15))
    expected = _expected(rows, ops)
    cut_sets = [
        [],
        list(range(1, len(rows))),
        sorted(rng.sample(range(1, len(rows)), min(len(rows) - 1, 7))) if len(rows) > 1 else [],
    ]
    for cuts in cut_sets:
        assert _walked(rows, cuts, ops) == expected, cuts


def test_walk_holds_a_pair_read_only_in_a_later_batch():
    """A send whose only read comes in the next batch is given, once; a
    send whose pair ends unread is not."""
    rows = [(True, 1, 0, 5), (True, 2, 0, 5), (False, 9, 0, 5), (True, 3, 0, 6), (True, 4, 1, 6), (False, 9, 1, 6)]
    assert _expected(rows, None) == Counter({(1, 0, 5): 1, (2, 0, 5): 1, (4, 1, 6): 1})
    assert _walked(rows, [1, 2, 3, 4, 5], None) == _expected(rows, None)
    assert _walked(rows, [2], None) == _expected(rows, None)


def test_read_by_ok_on_rows_partitioned_by_key(spark):
    """On Spark, over rows partitioned by key as the loaded table is: a send
    read twice comes back once; one read only by a failed poll, or not at
    all, does not; `ops` keeps only those ops' sends."""
    from pyspark.sql import functions as F

    from checkers.reads import read_by_ok
    from checkers.table_format import FAIL_CODE, OK_CODE, POLL_ROW, SEND_ROW

    rows = spark.createDataFrame(
        [
            (POLL_ROW, OK_CODE, 1, 0, 1),
            (POLL_ROW, OK_CODE, 2, 0, 1),  # the same record read again
            (POLL_ROW, OK_CODE, 1, 1, 2),
            (POLL_ROW, FAIL_CODE, 3, 2, 3),  # read only by a failed poll
            (SEND_ROW, OK_CODE, 7, 0, 1),
            (SEND_ROW, OK_CODE, 7, 1, 2),
            (SEND_ROW, OK_CODE, 8, 2, 3),
            (SEND_ROW, OK_CODE, 9, 3, 4),
        ],
        "kind int, tcode int, op long, key long, value long",
    ).repartition(3, "key")
    sends = F.col("kind") == SEND_ROW
    assert sorted(tuple(r) for r in read_by_ok(rows, sends).collect()) == [(7, 0, 1), (7, 1, 2)]
    assert read_by_ok(rows, sends, ops=[8, 9]).collect() == []
    assert [tuple(r) for r in read_by_ok(rows, sends & (F.col("key") == 1)).collect()] == [(7, 1, 2)]
