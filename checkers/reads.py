"""Which sends an `ok` poll read, looked up where the loaded table keeps them.

The loaded table holds each key's rows in one partition (it is partitioned
by route, and a key row's route is its key), and so does any filter of it.
A send and the polls that read it are rows of the same key, so whether a
send was read is known inside its partition: its rows are sorted there by
(key, value), and a Python worker walks them, batch by batch, keeping only
the (key, value) it is in. No shuffle; the sort spills as Spark's sorts do,
and the worker holds a batch and a few sends at a time.

The finders that ask (the cross-key facts' `info` transactions with a read
send, the torn-transaction finder's candidates) used a sort-merge semi join
of the sends with every `ok` poll: both sides shuffled and sorted. On the
10M-event txn shape of issue 42 that shuffle of every poll was most of the
cross-key facts' time (docs/CHECKERS.md). Before that, the polls were made
distinct first: at 10M events of 100-send transactions the torn-transaction
finder took 875 s that way, in a hash aggregation fallen back to sorting
its spills.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.packed_order import packed_order
from checkers.table_format import OK_CODE, POLL_ROW

FIELDS = ("op", "key", "value")  # of a send row given back
READ_SENDS_SCHEMA = ", ".join(f"{name} long" for name in FIELDS)
_ARROW_SCHEMA = pa.schema([(name, pa.int64()) for name in FIELDS])


def read_by_ok(rows: DataFrame, sends: Column, ops: list[int] | None = None, metrics: dict | None = None) -> DataFrame:
    """The send rows of `rows` that `sends` picks (and, given `ops`, of
    those ops) that an `ok` poll of `rows` read, as (op, key, value), each
    send row once. `rows` must be the loaded table or a filter of it (each
    key's rows in one partition); `sends` must pick send rows only. With
    the load's `metrics`, the sort is on one packed number when it can be."""
    send = F.coalesce(sends, F.lit(False))
    ok_poll = (F.col("kind") == POLL_ROW) & (F.col("tcode") == OK_CODE) & F.col("value").isNotNull()
    picked = rows.where(send | ok_poll).select(send.alias("send"), *FIELDS)
    wanted = None if ops is None else np.unique(np.asarray(ops, dtype=np.int64))
    order = packed_order(metrics or {}, ("key", "value"))
    return picked.sortWithinPartitions(*order).mapInArrow(_reader(wanted), READ_SENDS_SCHEMA)


def _reader(ops: np.ndarray | None):
    def run(batches):
        walk = ReadSends(ops)
        for batch in batches:
            if batch.num_rows:
                yield from _batches(walk.feed(_columns(batch)))
        yield from _batches(walk.close())

    return run


def _columns(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    return {name: batch.column(name).to_numpy(zero_copy_only=False) for name in ("send", *FIELDS)}


def _batches(found: dict[str, np.ndarray]):
    if len(found["op"]):
        yield pa.RecordBatch.from_arrays([pa.array(found[name]) for name in FIELDS], schema=_ARROW_SCHEMA)


class ReadSends:
    """Walks one partition's send and poll rows sorted by (key, value) and
    gives the sends of every (key, value) an `ok` poll read. The last
    (key, value) of a batch may go on in the next one, so its sends are held
    until it ends (a record's sends: one, or a few for a duplicate)."""

    def __init__(self, ops: np.ndarray | None = None):
        self.ops = ops
        self.pair: tuple[int, int] | None = None  # the (key, value) still open
        self.polled = False  # whether an ok poll read it
        self.held = _empty()  # its sends so far

    def feed(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The sends of the pairs that end in these rows (sorted by key, value) and were read."""
        key, value, send = rows["key"], rows["value"], rows["send"].astype(bool)
        n = len(key)
        starts = np.r_[True, (key[1:] != key[:-1]) | (value[1:] != value[:-1])]
        goes_on = self.pair is not None and (int(key[0]), int(value[0])) == self.pair
        ended = _empty() if goes_on else self.close()  # the pair left open ends where these rows start
        group = np.cumsum(starts) - 1
        groups = int(group[-1]) + 1
        polled = np.bincount(group, weights=(~send).astype(np.float64), minlength=groups) > 0
        if goes_on:
            polled[0] |= self.polled
        picked = send if self.ops is None else send & np.isin(rows["op"], self.ops)
        last = group == groups - 1
        found = {name: rows[name][picked & ~last & polled[group]] for name in FIELDS}
        if goes_on and groups > 1 and polled[0]:
            found = _joined(self.held, found)
        found = _joined(ended, found)
        held = {name: rows[name][picked & last] for name in FIELDS}
        self.held = _joined(self.held, held) if goes_on and groups == 1 else held
        self.pair, self.polled = (int(key[n - 1]), int(value[n - 1])), bool(polled[-1])
        return found

    def close(self) -> dict[str, np.ndarray]:
        """Ends the open (key, value): its held sends if an ok poll read it."""
        found = self.held if self.polled else _empty()
        self.pair, self.polled, self.held = None, False, _empty()
        return found


def _empty() -> dict[str, np.ndarray]:
    return {name: np.empty(0, dtype=np.int64) for name in FIELDS}


def _joined(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([first[name], second[name]]) for name in FIELDS}
