"""The load without Spark's row-by-row parse: Python workers parse each file
partition with pyarrow and build the table's rows with numpy.

checkers/load.py parses every line with `from_json`, pairs each completion
with its invoke through a window per process (a shuffle and a sort of every
event), then builds the rows with SQL expressions. Most of a large check's
time went there. This module builds the very same rows, column for column,
in two passes over the file's partitions, with no shuffle before the one
by route:

1. each partition is parsed (checkers/eventparse.py) and summed up per
   process: its first event and its last two, how many assign/subscribe
   ops it completed, its latest `ok` init (Arrow rows, SUMMARY_ARROW). The
   driver folds those summaries per process, in partition order, into what
   each partition needs from the ones before and after it (a process never
   has two ops in flight, so an op split across two partitions is its last
   event in one and its first in the next);
2. each partition is turned into rows, the pairing done with the carried
   facts. A file of one partition (a small run) skips pass 1: pass 2 sums
   its one partition up itself.

In local mode each line is parsed once: pass 1 parses it in full and leaves
the partition's columns in a scratch directory (Arrow IPC, lz4) that pass 2
reads instead of parsing again (`parse_cache`). Elsewhere pass 1 parses only
the fields its summaries use and pass 2 parses the partition in full: its
task may run on another host, and files left there would outlive the load.

Anything the fast path does not take (a line that breaks a rule, a torn
tail, a file that changed between the passes) returns None, and
checkers/load.py loads the run instead and names the bad line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from checkers.arrays import NULL
from checkers.eventparse import (
    CLIENT_SCHEMA,
    INVOKE_CODE,
    REBALANCE_TYPE,
    Events,
    Suspect,
    events_of,
    ints,
    mop_fields,
    parse,
)
from checkers.history_format import COMMIT, FAIL, INFO, INIT, INVOKE, NEMESIS, OK, POLL, RESETS, SEND, TXN, TYPE_CODES
from checkers.table_format import (
    COMMIT_ROW,
    FROM_ROW,
    NEMESIS_ROUTE,
    OP_ROW,
    POLL_ROW,
    PROBLEM_ROUTE,
    PROBLEM_ROW,
    REBALANCE_ROW,
    SEND_ROW,
    pid_route,
)

OK_T, FAIL_T, INFO_T = TYPE_CODES[OK], TYPE_CODES[FAIL], TYPE_CODES[INFO]
TYPE_NAMES = {OK_T: OK, FAIL_T: FAIL, INFO_T: INFO, INVOKE_CODE: INVOKE}

# The rows as pass 2 yields them: the table's columns, except that `group`
# is on every row that has one (the JVM hashes it into `gid`, then keeps it
# on op rows only) and a nemesis op carries its line (the JVM reads its
# `value` out of it, as checkers/load.py does, so the text is the same).
ROW_ARROW = pa.schema(
    [
        ("kind", pa.int32()),
        ("route", pa.int64()),
        ("op", pa.int64()),
        ("mop_index", pa.int32()),
        ("key", pa.int64()),
        ("value", pa.int64()),
        ("offset", pa.int64()),
        ("poll", pa.int32()),
        ("from_key", pa.int64()),
        ("from_value", pa.int64()),
        ("process", pa.string()),
        ("pid", pa.int64()),
        ("f", pa.string()),
        ("type", pa.string()),
        ("tcode", pa.int32()),
        ("is_txn", pa.bool_()),
        ("invoke_index", pa.int64()),
        ("invoke_time", pa.int64()),
        ("complete_time", pa.int64()),
        ("error", pa.string()),
        ("txn_id", pa.string()),
        ("producer_id", pa.int64()),
        ("epoch", pa.int64()),
        ("commit_time", pa.int64()),
        ("_group", pa.string()),
        ("auto", pa.bool_()),
        ("keys", pa.list_(pa.int64())),
        ("rebalance", pa.list_(REBALANCE_TYPE)),
        ("_nemesis_line", pa.string()),
        ("cut_short", pa.bool_()),
        ("n_sends", pa.int32()),
        ("n_send_keys", pa.int32()),
        ("reads", pa.bool_()),
        ("seg", pa.int64()),
        ("own_epoch", pa.int64()),
        ("own_producer_id", pa.int64()),
        ("line", pa.int64()),
        ("_tight", pa.bool_()),
    ]
)
# Pass 1's summaries, as Arrow rows: one per partition (`pid` null: the
# index of its first event and its count, or why it is suspect), and one per process the
# partition holds, with that process's first, last and second-to-last
# events, its latest instance start (`init_`) and its resets (`seg`).
# An event's fields as the parse typed them, but its type as its code.
FACT_FIELDS = (("type", pa.int64()),) + tuple(
    (name, CLIENT_SCHEMA.field(name).type)
    for name in ("index", "time", "f", "txn_id", "group", "keys", "epoch", "producer_id")
)
ROLES = ("first", "last", "last2", "init")
SUMMARY_ARROW = pa.schema(
    [
        ("partition", pa.int32()),
        ("part_first_index", pa.int64()),
        ("part_count", pa.int64()),
        ("suspect", pa.string()),
        ("pid", pa.int64()),
        ("first_init", pa.bool_()),
        ("first_own_txn", pa.bool_()),
        ("seg", pa.int64()),
    ]
    + [(f"{role}_{name}", type_) for role in ROLES for name, type_ in FACT_FIELDS]
)
# The loaded table's columns, in checkers/load.py's order.
TABLE_COLUMNS = (
    "kind",
    "route",
    "op",
    "mop_index",
    "key",
    "value",
    "offset",
    "poll",
    "from_key",
    "from_value",
    "process",
    "pid",
    "f",
    "type",
    "tcode",
    "is_txn",
    "invoke_index",
    "invoke_time",
    "complete_time",
    "error",
    "txn_id",
    "producer_id",
    "epoch",
    "commit_time",
    "group",
    "gid",
    "auto",
    "keys",
    "rebalance",
    "value_json",
    "cut_short",
    "n_sends",
    "n_send_keys",
    "reads",
    "seg",
    "own_epoch",
    "own_producer_id",
    "line",
    "problem_rank",
    "problem",
    "text",
    "_tight",
)


def fast_rows(
    spark: SparkSession, history, keys: list[int], cache: str | None = None, local_files: bool | None = None
) -> DataFrame | None:
    """The load's rows (before the shuffle by route), or None when the fast
    path does not take this history (checkers/load.py then loads it).
    `cache`: a `parse_cache` directory, which must outlive the rows' first job.
    `local_files`: tasks read the file themselves (default: in local mode)."""
    known = np.array(sorted(keys), dtype=np.int64)
    source = file_input(spark, history, local_files)
    carries = None  # one partition: pass 2 sums it up itself, one job instead of two
    if source.partitions > 1:
        carries = fold(partition_summaries(source, known, cache))
        if carries is None:
            return None
    else:
        cache = None  # no pass 1 to leave anything there
    raw = source.frame.mapInArrow(_row_maker(known, carries, cache, source.parts), from_arrow_schema(ROW_ARROW))
    group = F.col("_group")
    derived = {
        "group": F.when(F.col("kind") == OP_ROW, group),
        "gid": F.when(group.isNotNull(), F.xxhash64(group)),
        "value_json": F.from_json("_nemesis_line", "value string").getField("value"),
        "problem_rank": F.lit(None).cast("int"),
        "problem": F.lit(None).cast("string"),
        "text": F.lit(None).cast("string"),
    }
    return raw.select(*[derived[name].alias(name) if name in derived else F.col(name) for name in TABLE_COLUMNS])


def partition_summaries(source: FileInput, known: np.ndarray, cache: str | None = None) -> pa.Table:
    """Pass 1 over the file's partitions: their summaries (SUMMARY_ARROW);
    with `cache`, each partition's parse is left there."""
    return source.frame.mapInArrow(_summarizer(known, cache, source.parts), from_arrow_schema(SUMMARY_ARROW)).toArrow()


# ---------------------------------------------------------------- the input


@dataclass(frozen=True)
class FileInput:
    """The history's partitions: `frame`, one Spark partition each, and
    `parts(batches)`, which yields a task's (partition, lines()) pairs."""

    frame: DataFrame
    parts: Callable
    partitions: int


def file_input(spark: SparkSession, history, local_files: bool | None = None) -> FileInput:
    """In local mode the tasks read their byte ranges of the file themselves
    (cut at newlines by the driver, about as large as Spark's own file
    partitions): Spark's text reader would read each line into the JVM and
    ship it to Python again in both passes. Elsewhere Spark reads the file."""
    if local_files is None:
        local_files = _tasks_run_here(spark)
    if not local_files:
        text = spark.read.text(str(history))
        return FileInput(text, _from_text, text.rdd.getNumPartitions())
    ranges = line_ranges(Path(history), _split_bytes(spark, Path(history).stat().st_size))
    return FileInput(
        spark.range(len(ranges), numPartitions=len(ranges)), _ranges_reader(str(history), ranges), len(ranges)
    )


def _tasks_run_here(spark: SparkSession) -> bool:
    """Local mode: every task runs on this host and sees its files (the
    history, and the parse cache pass 1 leaves for pass 2)."""
    return spark.sparkContext.master.startswith("local")


def _split_bytes(spark: SparkSession, size: int) -> int:
    """Spark's own split size for one file of this size (FilePartition.maxSplitBytes)."""
    to_bytes = spark.sparkContext._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes
    most = to_bytes(spark.conf.get("spark.sql.files.maxPartitionBytes"))
    open_cost = to_bytes(spark.conf.get("spark.sql.files.openCostInBytes"))
    minimum = spark.conf.get("spark.sql.files.minPartitionNum", None)
    slots = int(minimum) if minimum else spark.sparkContext.defaultParallelism
    return max(1, min(most, max(open_cost, (size + open_cost) // max(1, slots))))


def line_ranges(path: Path, split: int, chunk: int = 1 << 16) -> list[tuple[int, int]]:
    """[start, end) byte ranges of about `split` bytes that cover the file,
    each ending just after a newline (or at the end of the file)."""
    size = path.stat().st_size
    bounds = [0]
    with open(path, "rb") as file:
        while bounds[-1] + split < size:
            at = bounds[-1] + split - 1  # the range ends after the first newline from here
            file.seek(at)
            while True:
                block = file.read(chunk)
                found = block.find(b"\n")
                if found >= 0 or not block:
                    at = at + found + 1 if found >= 0 else size
                    break
                at += len(block)
            bounds.append(at)
    bounds.append(size)
    ranges = [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    return ranges or [(0, 0)]


def read_lines(path: str, start: int, end: int) -> pa.Array:
    """The lines of bytes [start, end) of a file, as Spark's text reader
    gives them (without their newlines); Suspect if a line ends in a carriage
    return, which Spark would cut off, or if the range does not start a line."""
    with open(path, "rb") as file:
        if start:
            file.seek(start - 1)
            if file.read(1) != b"\n":
                raise Suspect("a range that does not start a line (the file changed)")
        data = file.read(end - start)
    if b"\r" in data:
        raise Suspect("a carriage return (Spark's text reader ends a line there)")
    buffer = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(buffer == ord("\n"))
    count = len(newlines) + (1 if len(buffer) and buffer[-1] != ord("\n") else 0)
    starts = np.r_[0, newlines + 1][:count]
    body = np.delete(buffer, newlines)
    offsets = np.r_[starts - np.arange(count), len(body)].astype(np.int64)
    return pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(body))


def _from_text(batches):
    """A task over `spark.read.text`: its one partition, whose lines come with it."""
    batches = iter(batches)
    yield _partition_id(), lambda: _partition_lines(batches)
    for _ in batches:  # pyspark requires the input read to its end, lines used or not
        pass


def _ranges_reader(path: str, ranges: list[tuple[int, int]]):
    def parts(batches):
        """A task over `spark.range`: each id it holds names the range it reads."""
        for partition in [int(i) for batch in batches for i in batch.column(0).to_numpy()]:
            yield partition, functools.partial(read_lines, path, *ranges[partition])

    return parts


@contextlib.contextmanager
def parse_cache(spark: SparkSession) -> Iterator[str | None]:
    """A scratch directory for pass 1's parses while the block runs (removed
    after), or None outside local mode, where pass 2 may run on another host."""
    if not _tasks_run_here(spark):
        yield None
        return
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS") or spark.sparkContext.getConf().get("spark.local.dir", "")
    directory = tempfile.mkdtemp(prefix="gregor-parsed-", dir=local_dirs.split(",")[0] or None)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _cached_path(cache: str, partition: int) -> str:
    return os.path.join(cache, f"{partition}.arrow")


def _save_parse(cache: str, partition: int, table: pa.Table) -> None:
    """Writes the partition's parse where pass 2 looks for it, whole or not
    at all (a full disk only costs pass 2 its parse)."""
    path = _cached_path(cache, partition)
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with (
            pa.OSFile(partial, "wb") as sink,
            ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression="lz4")) as writer,
        ):
            writer.write_table(table)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(partial)


def _saved_parse(cache: str | None, partition: int) -> Events | None:
    """The partition's parse from pass 1, or None (not local mode, or no file)."""
    if cache is None:
        return None
    try:
        with pa.OSFile(_cached_path(cache, partition), "rb") as source:
            table = ipc.open_file(source).read_all()
    except (FileNotFoundError, pa.ArrowInvalid):
        return None
    return events_of(table)


def _partition_lines(batches) -> pa.Array:
    chunks = [batch.column(0) for batch in batches]
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())


def _partition_id() -> int:
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


# ---------------------------------------------------------------- pass 1


def _summarizer(known: np.ndarray, cache: str | None, parts):
    def run(batches):
        for partition, lines in parts(batches):
            try:
                events = parse(lines(), known, summary_only=cache is None)
                if cache is not None:
                    _save_parse(cache, partition, events.table)
                summary = summarize(events, partition)
            except Suspect as suspect:
                summary = _summary_rows({"partition": [partition], "suspect": [str(suspect)]}, 1)
            yield from summary.to_batches()

    return run


def _by_process(events: Events) -> tuple[np.ndarray, np.ndarray]:
    """The events in process order (line order within a process), and where each process starts."""
    perm = np.argsort(events.pid, kind="stable")
    pid = events.pid[perm]
    start = np.r_[True, pid[1:] != pid[:-1]] if len(pid) else np.empty(0, bool)
    return perm, start


def _is_reset(events: Events) -> np.ndarray:
    return (events.type != INVOKE_CODE) & pc.is_in(events.f, pa.array(list(RESETS))).to_numpy(zero_copy_only=False)


def _init_candidate(events: Events) -> tuple[np.ndarray, np.ndarray]:
    """(an ok init with an epoch, whether it names its txn_id itself): it is
    an instance's start if its txn_id, or its invoke's, is known."""
    epoch_null = ints(events.table.column("epoch"))[1]
    is_init = pc.equal(events.f, INIT).to_numpy(zero_copy_only=False)
    candidate = (events.type == OK_T) & is_init & ~epoch_null
    return candidate, ~events.table.column("txn_id").is_null().to_numpy(zero_copy_only=False)


def _summary_rows(columns: dict, n: int) -> pa.Table:
    return pa.Table.from_arrays(
        [_array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type) for f in SUMMARY_ARROW],
        schema=SUMMARY_ARROW,
    )


def _array(values, type_) -> pa.Array:
    return values.cast(type_) if isinstance(values, pa.Array) else pa.array(values, type_)


def _facts(events: Events, role: str, at: np.ndarray) -> dict:
    """The FACT_FIELDS of the events at positions `at` (-1: none), as `role`'s columns."""
    none, picked = at < 0, np.maximum(at, 0)
    take = pa.array(at, pa.int64(), mask=none)
    values = {name: pa.array(getattr(events, name)[picked], mask=none) for name in ("type", "index", "time")}
    values["f"] = events.f.take(take)
    for name in ("txn_id", "group", "keys", "epoch", "producer_id"):
        values[name] = events.table.column(name).combine_chunks().take(take)
    return {f"{role}_{name}": values[name] for name, _ in FACT_FIELDS}


def summarize(events: Events, partition: int) -> pa.Table:
    """What the other partitions need to know of this one, per process
    (SUMMARY_ARROW); raises Suspect if an op of one process does not pair
    within it."""
    n = len(events)
    meta = {"partition": [partition], "part_first_index": [int(events.index[0]) if n else None], "part_count": [n]}
    if n == 0:
        return _summary_rows(meta, 1)
    perm, start = _by_process(events)
    types, fs = events.type[perm], events.f.take(pa.array(perm))
    follows = ~start
    completion = types != INVOKE_CODE
    prev_type = np.r_[-1, types[:-1]]
    same_f = np.r_[False, pc.equal(fs[1:], fs[:-1]).to_numpy(zero_copy_only=False)] if n > 1 else np.zeros(1, bool)
    bad = follows & completion & ((prev_type != INVOKE_CODE) | ~same_f)
    bad |= follows & ~completion & (prev_type == INVOKE_CODE)
    if bad.any():
        raise Suspect("an op that does not pair with its invoke")
    reset = _is_reset(events)[perm]
    candidate, own_txn = _init_candidate(events)
    candidate, own_txn = candidate[perm], own_txn[perm]
    prev_txn_known = np.r_[False, own_txn[:-1]]  # own_txn: the event names a txn_id
    init_local = candidate & (own_txn | prev_txn_known) & follows
    lo = np.flatnonzero(start)
    hi = np.r_[lo[1:], n]
    # The latest instance start of each process: the last init_local at or before its end.
    latest = np.maximum.accumulate(np.where(init_local, np.arange(n), -1))[hi - 1]
    columns = {
        "partition": np.full(len(lo), partition, np.int32),
        "pid": events.pid[perm[lo]],
        "first_init": candidate[lo],
        "first_own_txn": own_txn[lo],
        "seg": np.add.reduceat(reset.astype(np.int64), lo),
    }
    columns.update(_facts(events, "first", perm[lo]))
    columns.update(_facts(events, "last", perm[hi - 1]))
    columns.update(_facts(events, "last2", np.where(hi - lo >= 2, perm[np.maximum(hi - 2, 0)], -1)))
    columns.update(_facts(events, "init", np.where(latest >= lo, perm[np.maximum(latest, 0)], -1)))
    return pa.concat_tables([_summary_rows(meta, 1), _summary_rows(columns, len(lo))])


def fold(summaries: pa.Table) -> dict | None:
    """Per partition and process, what comes before and after it: the last
    two events, the count of resets, the latest instance start, and whether
    the process has events in a later partition. A process with none of
    these (its events all in one partition) is left out. None when a
    summary is suspect or partitions do not join up."""
    is_meta = summaries.column("pid").is_null().to_numpy(zero_copy_only=False)
    meta = summaries.filter(pa.array(is_meta)).select(["partition", "part_first_index", "part_count", "suspect"])
    meta = meta.to_pydict()
    if any(text is not None for text in meta["suspect"]):
        return None
    carries: dict[int, dict] = {}
    seen = 0
    for partition, first_index, count in sorted(zip(meta["partition"], meta["part_first_index"], meta["part_count"])):
        if count and first_index != seen:
            return None
        seen += count
        carries[partition] = {"count": count, "first_index": first_index, "processes": {}}
    rows = summaries.filter(pa.array(~is_meta))
    if len(rows) == 0:
        return carries
    order = np.lexsort(
        (rows.column("partition").to_numpy(zero_copy_only=False), rows.column("pid").to_numpy(zero_copy_only=False))
    )
    rows = rows.take(pa.array(order))

    def column(name: str) -> np.ndarray:
        return ints(rows.column(name))[0]

    pid = column("pid")
    n = len(pid)
    has_prev = np.r_[False, pid[1:] == pid[:-1]]
    has_next = np.r_[has_prev[1:], False]
    prev = np.maximum(np.arange(n) - 1, 0)

    def before(values: np.ndarray, none=-1) -> np.ndarray:
        """Each row's value of the row before it, if that is the same process's."""
        return np.where(has_prev, values[prev], none)

    first_type, last_type = column("first_type"), column("last_type")
    first_f, last_f = rows.column("first_f"), rows.column("last_f")
    same_f = np.r_[False, pc.equal(first_f[1:], last_f[:-1]).to_numpy(zero_copy_only=False)]
    last_was_invoke = before(last_type) == INVOKE_CODE
    bad = (first_type != INVOKE_CODE) & ~(last_was_invoke & same_f)
    bad |= (first_type == INVOKE_CODE) & last_was_invoke
    if bad.any():
        return None
    group_start = np.maximum.accumulate(np.where(has_prev, 0, np.arange(n)))
    seg = column("seg")
    seg_after = np.cumsum(seg)
    seg_after -= (seg_after - seg)[group_start]
    # Facts are referenced as (row, role) codes: 4 * row + ROLES.index(role), -1 for none.
    code = {role: 4 * np.arange(n) + k for k, role in enumerate(ROLES)}
    last2_known = ~rows.column("last2_type").is_null().to_numpy(zero_copy_only=False)
    last_before = before(code["last"])
    last2_after = np.where(last2_known, code["last2"], last_before)
    last_txn_known = ~rows.column("last_txn_id").is_null().to_numpy(zero_copy_only=False)
    first_init = rows.column("first_init").to_numpy(zero_copy_only=False)
    first_own_txn = rows.column("first_own_txn").to_numpy(zero_copy_only=False)
    starts_instance = first_init & (first_own_txn | before(last_txn_known, False))
    init_known = ~rows.column("init_type").is_null().to_numpy(zero_copy_only=False)
    init_here = np.where(init_known, code["init"], np.where(starts_instance, code["first"], -1))
    latest = np.maximum.accumulate(np.where(init_here >= 0, np.arange(n), -1))
    init_after = np.where(latest >= group_start, init_here[np.maximum(latest, 0)], -1)
    kept = np.flatnonzero(has_prev | has_next)
    refs = {"last": last_before[kept], "last2": before(last2_after)[kept], "init": before(init_after)[kept]}
    facts = _facts_of(rows, np.concatenate(list(refs.values())))
    partition = rows.column("partition").to_numpy(zero_copy_only=False)
    seg_before = before(seg_after, 0)
    for j, i in enumerate(kept):
        carries[int(partition[i])]["processes"][str(int(pid[i]))] = {
            "last": facts.get(int(refs["last"][j])),
            "last2": facts.get(int(refs["last2"][j])),
            "seg": int(seg_before[i]),
            "init": facts.get(int(refs["init"][j])),
            "next": bool(has_next[i]),
        }
    return carries


def _facts_of(rows: pa.Table, codes: np.ndarray) -> dict[int, dict]:
    """The facts each (row, role) code names, as dicts of FACT_FIELDS."""
    found = {}
    codes = np.unique(codes[codes >= 0])
    for k, role in enumerate(ROLES):
        mine = codes[codes % 4 == k]
        if len(mine):
            names = [f"{role}_{name}" for name, _ in FACT_FIELDS]
            picked = rows.select(names).take(pa.array(mine // 4)).rename_columns([name for name, _ in FACT_FIELDS])
            found.update(zip(mine.tolist(), picked.to_pylist()))
    return found


# ---------------------------------------------------------------- pass 2


def _row_maker(known: np.ndarray, carries: dict, cache: str | None, parts):
    def run(batches):
        for partition, lines in parts(batches):
            yield from _partition_rows(partition, lines, known, carries, cache)

    return run


def _partition_rows(partition: int, lines, known: np.ndarray, carries: dict | None, cache: str | None):
    carry = carries.get(partition) if carries is not None else None
    try:
        events = _saved_parse(cache, partition)
        if events is None:
            events = parse(lines(), known)
        if carries is None:
            carry = (fold(summarize(events, partition)) or {}).get(partition)
    except Suspect:
        events = None
    if (
        carry is None
        or events is None
        or len(events) != carry["count"]
        or (len(events) and int(events.index[0]) != carry["first_index"])
    ):
        # A line pass 2 does not take (with one partition, pass 2 is the
        # only pass), or the file changed since pass 1: one problem row,
        # and the load falls back to checkers/load.py.
        yield _table({"kind": pa.array([PROBLEM_ROW], pa.int32()), "route": pa.array([PROBLEM_ROUTE])}, 1).to_batches()[
            0
        ]
    elif len(events):
        yield from make_rows(events, carry["processes"]).to_batches()


INT64 = pa.int64()


def _nullable(values: np.ndarray, null: np.ndarray | None = None, type_=INT64) -> pa.Array:
    return pa.array(values, type=type_, mask=(values == NULL) if null is None else null)


def make_rows(events: Events, carry: dict) -> pa.Table:
    """The table's rows for one partition's events (checkers/load.py's `_rows`, for valid lines)."""
    n = len(events)
    table = events.table
    perm, start = _by_process(events)
    pid_sorted = events.pid[perm]
    group_at = np.cumsum(start) - 1
    firsts = np.flatnonzero(start)
    lasts = np.r_[firsts[1:] - 1, n - 1]
    carry_of = [carry.get(str(int(pid_sorted[i]))) for i in firsts]
    # Extended event space: positions 0..n-1 are this partition's events (in
    # line order), n.. are the carried last and second-to-last events.
    ext, ext_pos = [], {}
    for g, c in enumerate(carry_of):
        for name in ("last", "last2"):
            if c is not None and c[name] is not None:
                ext_pos[(g, name)] = n + len(ext)
                ext.append(c[name])
    # prev and prev2 in process order, as extended positions (-1: none).
    sorted_prev = np.r_[-1, perm[:-1]]
    sorted_prev2 = np.r_[-1, -1, perm[:-2]][:n]
    is_second = np.r_[False, start[:-1]] & ~start
    prev = np.where(start, -1, sorted_prev)
    prev2 = np.where(start | is_second, -1, sorted_prev2)
    for g, first in enumerate(firsts):
        prev[first] = ext_pos.get((g, "last"), -1)
        prev2[first] = ext_pos.get((g, "last2"), -1)
        if first + 1 < n and not start[first + 1]:
            prev2[first + 1] = ext_pos.get((g, "last"), -1)
    has_next = np.r_[~start[1:], False]
    for g, last in enumerate(lasts):
        has_next[last] = bool(carry_of[g] and carry_of[g]["next"])
    # Back to line order.
    unsort = np.empty(n, np.int64)
    unsort[perm] = np.arange(n)
    prev, prev2, has_next = prev[unsort], prev2[unsort], has_next[unsort]

    def extended(values: np.ndarray, name: str) -> np.ndarray:
        extra = np.array([NULL if e[name] is None else e[name] for e in ext], dtype=np.int64)
        return np.concatenate([values, extra])

    def extended_arrow(column: pa.Array, name: str, type_) -> pa.Array:
        return pa.concat_arrays([column, pa.array([e[name] for e in ext], type=type_)])

    def at(values: np.ndarray, where: np.ndarray) -> np.ndarray:
        return np.where(where >= 0, values[np.maximum(where, 0)], NULL)

    e_type = extended(events.type, "type")
    e_index = extended(events.index, "index")
    e_time = extended(events.time, "time")
    prev_type, prev_index, prev_time = at(e_type, prev), at(e_index, prev), at(e_time, prev)
    prev2_type, prev2_time = at(e_type, prev2), at(e_time, prev2)

    invoke = events.type == INVOKE_CODE
    cut = invoke & ~has_next
    real = ~invoke | cut
    # seg: resets completed before each event in its process (carried in).
    reset = _is_reset(events)
    reset_sorted = reset[perm].astype(np.int64)
    inclusive = np.cumsum(reset_sorted)
    base = np.array([c["seg"] if c else 0 for c in carry_of], dtype=np.int64)
    seg_sorted = inclusive - reset_sorted - (inclusive - reset_sorted)[firsts][group_at] + base[group_at]
    seg = seg_sorted[unsort]
    # own init: the latest ok init before each event in its process.
    candidate, own_txn = _init_candidate(events)
    txn_col = table.column("txn_id").combine_chunks()
    e_txn = extended_arrow(txn_col, "txn_id", pa.string())
    prev_txn_known = np.zeros(n, bool)
    has_prev = prev >= 0
    prev_txn_known[has_prev] = ~e_txn.take(pa.array(prev[has_prev])).is_null().to_numpy(zero_copy_only=False)
    is_init = candidate & (own_txn | prev_txn_known)
    # The latest init strictly before each event, within its process.
    marker = np.where(is_init[perm], np.arange(n), -1)
    running = np.maximum.accumulate(marker)
    before = np.r_[-1, running[:-1]]
    before = np.where(before >= firsts[group_at], before, -1)
    epoch, _ = ints(table.column("epoch"))
    producer, _ = ints(table.column("producer_id"))
    init_epoch_sorted = np.where(before >= 0, epoch[perm][np.maximum(before, 0)], NULL)
    init_producer_sorted = np.where(before >= 0, producer[perm][np.maximum(before, 0)], NULL)
    carried_init = [c["init"] if c else None for c in carry_of]
    no_local = before < 0
    for g, init in enumerate(carried_init):
        if init is not None:
            lo, hi = firsts[g], lasts[g] + 1
            mask = no_local[lo:hi]
            init_epoch_sorted[lo:hi][mask] = NULL if init["epoch"] is None else init["epoch"]
            init_producer_sorted[lo:hi][mask] = NULL if init["producer_id"] is None else init["producer_id"]
    own_epoch, own_producer = init_epoch_sorted[unsort], init_producer_sorted[unsort]

    # Per-op facts shared by every row of the op.
    m = mop_fields(events.mops)
    mop_f = m["f"]
    is_send = pc.fill_null(pc.equal(mop_f, SEND), False).to_numpy(zero_copy_only=False) if m["n"] else np.zeros(0, bool)
    is_poll = pc.fill_null(pc.equal(mop_f, POLL), False).to_numpy(zero_copy_only=False) if m["n"] else np.zeros(0, bool)
    is_commit = (
        pc.fill_null(pc.equal(mop_f, COMMIT), False).to_numpy(zero_copy_only=False) if m["n"] else np.zeros(0, bool)
    )
    parent = m["parent"]
    n_sends = np.bincount(parent[is_send], minlength=n).astype(np.int64)
    is_txn = pc.equal(events.f, TXN).to_numpy(zero_copy_only=False)
    send_keys = np.zeros(n, np.int64)
    if is_send.any():
        owners, send_key = parent[is_send], m["key"][0][is_send]
        order = np.lexsort((send_key, owners))  # np.unique(axis=1) costs 3 times as much
        owners, send_key = owners[order], send_key[order]
        distinct = np.r_[True, (owners[1:] != owners[:-1]) | (send_key[1:] != send_key[:-1])]
        send_keys = np.bincount(owners[distinct], minlength=n).astype(np.int64)
    n_send_keys = np.where(is_txn, send_keys, np.minimum(n_sends, 1))
    keyed_poll = is_poll & ~m["key"][1]
    reads = (events.type == OK_T) & (np.bincount(parent[keyed_poll], minlength=n) > 0)
    type_out = np.where(cut, INFO_T, events.type)
    tcode = np.where(type_out == OK_T, 0, np.where(type_out == FAIL_T, 1, 2))
    invoke_time = np.where(cut, events.time, prev_time)
    complete_time = np.where(cut, NULL, events.time)
    commit_time, _ = ints(table.column("commit_time"))
    group_col = table.column("group").combine_chunks()
    e_group = extended_arrow(group_col, "group", pa.string())
    prev_ptr = pa.array(np.where(prev >= 0, prev, 0))
    prev_group = pc.if_else(pa.array(prev >= 0), e_group.take(prev_ptr), pa.nulls(n, pa.string()))
    group = pc.coalesce(group_col, prev_group)

    # Op rows.
    ops = np.flatnonzero(real)
    tight = np.where(
        cut,
        (prev_type != INVOKE_CODE) & (events.time - prev_time <= 1),
        (prev2_type != INVOKE_CODE) & (prev_time - prev2_time <= 1),
    )
    tight_null = np.where(cut, prev < 0, prev2 < 0)
    take = pa.array(ops)
    e_txn_prev = pc.if_else(pa.array(prev >= 0), e_txn.take(prev_ptr), pa.nulls(n, pa.string()))
    e_keys = extended_arrow(table.column("keys").combine_chunks(), "keys", pa.list_(pa.int64()))
    prev_keys = pc.if_else(pa.array(prev >= 0), e_keys.take(prev_ptr), pa.nulls(n, pa.list_(pa.int64())))
    nem = events.nemesis
    process_text = pc.if_else(pa.array(nem), pa.scalar(NEMESIS), pc.cast(pa.array(events.pid), pa.string()))
    type_names = np.array([TYPE_NAMES[c] for c in range(4)], dtype=object)
    op_columns = {
        "kind": pa.array(np.full(len(ops), OP_ROW), pa.int32()),
        "route": pa.array(np.where(nem, NEMESIS_ROUTE, pid_route(events.pid))[ops]),
        "op": pa.array(events.index[ops]),
        "mop_index": pa.array(np.full(len(ops), -1), pa.int32()),
        "process": process_text.take(take),
        "pid": pa.array(events.pid[ops]),
        "f": events.f.take(take),
        "type": pa.array(type_names[type_out[ops]].tolist(), pa.string()),
        "invoke_index": _nullable(np.where(cut, events.index, prev_index)[ops]),
        "invoke_time": _nullable(invoke_time[ops]),
        "complete_time": _nullable(complete_time[ops]),
        "error": table.column("error").combine_chunks().take(take),
        "txn_id": pc.coalesce(txn_col, e_txn_prev).take(take),
        "producer_id": table.column("producer_id").combine_chunks().take(take),
        "epoch": table.column("epoch").combine_chunks().take(take),
        "commit_time": _nullable(commit_time[ops]),
        "_group": group.take(take),
        "auto": pc.fill_null(table.column("auto").combine_chunks(), False).take(take),
        "keys": pc.coalesce(table.column("keys").combine_chunks(), prev_keys).take(take),
        "rebalance": table.column("rebalance").combine_chunks().take(take),
        "_nemesis_line": table.column("text").combine_chunks().take(take),
        "cut_short": pa.array(cut[ops]),
        "n_sends": pa.array(n_sends[ops], pa.int32()),
        "n_send_keys": pa.array(n_send_keys[ops], pa.int32()),
        "reads": pa.array(reads[ops]),
        "seg": pa.array(seg[ops]),
        "own_epoch": _nullable(own_epoch[ops]),
        "own_producer_id": _nullable(own_producer[ops]),
        "line": pa.array(events.index[ops] + 1),
        "_tight": pa.array(tight[ops], mask=tight_null[ops]),
    }

    # Key rows: kept mops, then rebalance and copier-input markers.
    kept = real[parent] & (is_send | is_commit | (is_poll & ~m["key"][1])) if m["n"] else np.zeros(0, bool)
    mk = np.flatnonzero(kept)
    kinds = np.where(is_send, SEND_ROW, np.where(is_poll, POLL_ROW, COMMIT_ROW))
    marker = np.flatnonzero(kept & is_send & (m["from_n"] == 2))
    rebalance = table.column("rebalance").combine_chunks()
    reb_parent = pc.list_parent_indices(rebalance).to_numpy(zero_copy_only=False).astype(np.int64)
    reb_keys_list = pc.list_flatten(rebalance).field("keys") if len(reb_parent) else pa.array([], pa.list_(pa.int64()))
    reb_key_parent = (
        reb_parent[pc.list_parent_indices(reb_keys_list).to_numpy(zero_copy_only=False)]
        if len(reb_parent)
        else np.empty(0, np.int64)
    )
    reb_key = (
        pc.list_flatten(reb_keys_list).to_numpy(zero_copy_only=False) if len(reb_parent) else np.empty(0, np.int64)
    )
    reb_real = real[reb_key_parent] if len(reb_key_parent) else np.zeros(0, bool)
    reb_key, reb_key_parent = reb_key[reb_real], reb_key_parent[reb_real]

    owner = np.concatenate([parent[mk], reb_key_parent, parent[marker]]).astype(np.int64)
    key = np.concatenate([m["key"][0][mk], reb_key, m["from_key"][marker]])
    mop_at = np.concatenate([mk, np.full(len(reb_key), -1), marker])
    has_mop = mop_at >= 0
    mop_ptr = np.maximum(mop_at, 0)

    def from_mop(values: np.ndarray) -> np.ndarray:
        return np.where(has_mop, values[mop_ptr], NULL) if len(values) else np.full(len(mop_at), NULL)

    key_kind = np.concatenate([kinds[mk], np.full(len(reb_key), REBALANCE_ROW), np.full(len(marker), FROM_ROW)])
    key_columns = {
        "kind": pa.array(key_kind, pa.int32()),
        "route": pa.array(key),
        "op": pa.array(events.index[owner]),
        "mop_index": pa.array(np.where(has_mop, m["pos"][mop_ptr] if m["n"] else 0, -1), pa.int32()),
        "key": pa.array(key),
        "value": _nullable(from_mop(m["value"][0])),
        "offset": _nullable(from_mop(m["offset"][0])),
        "poll": _nullable(from_mop(m["poll"][0]), type_=pa.int32()),
        "from_key": _nullable(from_mop(m["from_key"])),
        "from_value": _nullable(from_mop(m["from_value"])),
        "pid": pa.array(events.pid[owner]),
        "tcode": pa.array(tcode[owner], pa.int32()),
        "is_txn": pa.array(is_txn[owner]),
        "invoke_time": _nullable(invoke_time[owner]),
        "complete_time": _nullable(complete_time[owner]),
        "commit_time": _nullable(commit_time[owner]),
        "_group": group.take(pa.array(owner)),
        "n_sends": pa.array(n_sends[owner], pa.int32()),
        "n_send_keys": pa.array(n_send_keys[owner], pa.int32()),
        "reads": pa.array(reads[owner]),
        "seg": pa.array(seg[owner]),
    }
    return pa.concat_tables([_table(op_columns, len(ops)), _table(key_columns, len(owner))])


def _table(columns: dict, n: int) -> pa.Table:
    return pa.Table.from_arrays(
        [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in ROW_ARROW], schema=ROW_ARROW
    )
