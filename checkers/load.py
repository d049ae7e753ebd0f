"""From history.jsonl + test.json to the one table every finder reads.

checkers/fastload.py builds the rows of a well-formed history (pyarrow and
numpy in Python workers, no shuffle); what it does not take is loaded here
by Spark SQL, which also names a bad line. Both build the same rows.

Here the history is parsed once with an explicit schema, each completion is
paired with its invoke (one shuffle by process), and every line becomes the
rows the finders need, in a single pass: one `op` row per op, one row per
micro-operation, marker rows for rebalances and consume-transform-produce
inputs, and `problem` rows for lines that break the format. These rows are
shuffled once by `route` (the key of a mop row, a per-process route for an
op row) and kept as one table (a local checkpoint; for a large history,
the shuffle's own files), so that every later pass reads it instead of the
history. Nothing of the history reaches
the driver: the job that stores the table also counts over it (one row
comes back), and only the first bad line, if any, is fetched to name it in
a one-line error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers.fastload import fast_rows, parse_cache
from checkers.history_format import (
    ASSIGN,
    COMMIT,
    FAIL,
    INFO,
    INIT,
    INVOKE,
    NEMESIS,
    OK,
    POLL,
    RESETS,
    SEND,
    SUBSCRIBE,
    TXN,
    TYPES,
)
from checkers.packed_order import RANGED_COLUMNS
from checkers.spark import session_conf
from checkers.table_format import (
    COMMIT_ROW,
    FAIL_CODE,
    FROM_ROW,
    INFO_CODE,
    KEY_KINDS,
    NEMESIS_ROUTE,
    OK_CODE,
    OP_ROW,
    POLL_ROW,
    PROBLEM_ROUTE,
    PROBLEM_ROW,
    REBALANCE_ROW,
    SEND_ROW,
)
from ground.errors import GregorError

CORRUPT = "_corrupt_record"

MOP_SCHEMA = T.StructType(
    [
        T.StructField("f", T.StringType()),
        T.StructField("key", T.LongType()),
        T.StructField("value", T.LongType()),
        T.StructField("offset", T.LongType()),
        T.StructField("poll", T.IntegerType()),
        T.StructField("from", T.ArrayType(T.LongType())),
    ]
)

REBALANCE_SCHEMA = T.StructType(
    [
        T.StructField("type", T.StringType()),
        T.StructField("keys", T.ArrayType(T.LongType())),
    ]
)

EVENT_SCHEMA = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        # Integers become their decimal text; "nemesis" stays as is.
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("mops", T.ArrayType(MOP_SCHEMA)),
        T.StructField("keys", T.ArrayType(T.LongType())),
        T.StructField("error", T.StringType()),
        # Nemesis `value` is any JSON; a string schema keeps its raw text.
        T.StructField("value", T.StringType()),
        T.StructField("group", T.StringType()),
        T.StructField("rebalance", T.ArrayType(REBALANCE_SCHEMA)),
        T.StructField("txn_id", T.StringType()),
        T.StructField("producer_id", T.LongType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("commit_time", T.LongType()),
        T.StructField("auto", T.BooleanType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

STORAGE = StorageLevel.MEMORY_AND_DISK
# Above this much history, stored tables go to local disk only. A 10M-event
# history (1.4 GB) ran the 2 GB driver heap out of memory while its blocks were
# being stored in memory (MemoryStore), whatever the partition size. Held in
# memory, a 3.6M-event history (490 MiB) filled the heap: its check took
# 44.3 s with the JVM at 2,556 MiB, against 29.7 s and 2,204 MiB on disk,
# and a 1.5 GB heap ran out. On disk costs nothing measurable at 1M events
# (a warm check 10.49 s against 10.62 s in memory, medians of 4), since the
# blocks stay in the page cache; small runs keep the memory path. (Measured
# with Spark's column cache; as checkpoints, a warm 1M check took 14.86 s
# in memory against 15.08 s on disk, medians of 4: still no gain.)
LARGE_HISTORY_BYTES = 64 << 20


def storage_level(history: Path) -> StorageLevel:
    """Where a run's stored tables live: memory (spilling to disk) for
    ordinary runs, disk only for very large histories."""
    return StorageLevel.DISK_ONLY if history.stat().st_size > LARGE_HISTORY_BYTES else STORAGE


# A problem's rank orders the problems of one line: the line itself first,
# then its mops (check by check), then unknown keys; pairing problems last.
PAIR_RANK = 100
UNKNOWN_IN_MOPS, UNKNOWN_IN_KEYS, UNKNOWN_IN_REBALANCE = 6, 7, 8

# One key pass task per this many bytes of history (at least one per core).
BYTES_PER_PARTITION = 64 << 20


@dataclass
class Tables:
    """The loaded run (docs/CHECKERS.md): the stored `rows` table and what
    the load learned on the way (`metrics`)."""

    spark: SparkSession
    test: dict
    rows: DataFrame
    metrics: dict
    directory: Path | None = None
    cache: dict = field(default_factory=dict)
    storage: StorageLevel = field(default_factory=lambda: STORAGE)  # of every table stored for this run

    @property
    def ops(self) -> DataFrame:
        """One row per op (completion paired with its invoke; an invoke cut short is `info`)."""
        return self.rows.where(F.col("kind") == OP_ROW).select(*OP_COLUMNS)

    @property
    def mops(self) -> DataFrame:
        """One row per micro-operation of an op (its completion's, or its invoke's
        if cut short), with its op's facts. The op's text lives on its op row, so
        this joins: for tests and exports, not for the finders."""
        mf = F.when(F.col("kind") == SEND_ROW, SEND).when(F.col("kind") == POLL_ROW, POLL).otherwise(COMMIT)
        mops = self.rows.where(F.col("kind").isin(SEND_ROW, POLL_ROW, COMMIT_ROW)).select(
            *[c for c in MOP_COLUMNS if c not in OP_FACTS and c != "mf"], mf.alias("mf")
        )
        return mops.join(self.ops.select("op", *OP_FACTS), "op").select(*MOP_COLUMNS)

    def release(self) -> None:
        """Frees everything this run keeps in Spark (the table and every cached
        result), and waits until it is gone. Spark removes blocks on a thread
        pool of its own: `gregor check` exits right after this, and a removal
        still under way when the JVM shut that pool down printed a
        RejectedExecutionException's stack trace after the results."""
        for value in list(self.cache.values()):
            if isinstance(value, DataFrame):
                free_rows(value, wait=True)
        self.cache.clear()
        free_rows(self.rows, wait=True)


OP_COLUMNS = (
    "op",
    "invoke_index",
    "process",
    "f",
    "type",
    "invoke_time",
    "complete_time",
    "error",
    "txn_id",
    "producer_id",
    "epoch",
    "commit_time",
    "group",
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
)
# What a mop row takes from its op row.
OP_FACTS = ("process", "f", "type", "invoke_index", "txn_id", "epoch", "producer_id", "group")
MOP_COLUMNS = (
    "op",
    "mop_index",
    "mf",
    "key",
    "value",
    "offset",
    "poll",
    "from_key",
    "from_value",
    "process",
    "f",
    "type",
    "invoke_index",
    "invoke_time",
    "complete_time",
    "txn_id",
    "epoch",
    "producer_id",
    "commit_time",
    "group",
)


def read_test(directory: Path) -> dict:
    """Reads test.json or says what is wrong with it."""
    path = directory / "test.json"
    if not path.is_file():
        raise GregorError(f"{path} not found: a run directory needs test.json next to history.jsonl")
    try:
        test = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise GregorError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(test, dict):
        raise GregorError(f"{path}: must hold a JSON object")
    keys = test.get("keys")
    if not isinstance(keys, dict) or not keys:
        raise GregorError(f'{path}: needs "keys", an object mapping each key to [topic, partition]')
    for key in keys:
        try:
            int(key)
        except ValueError as error:
            raise GregorError(f'{path}: key {key!r} in "keys" is not an integer') from error
    return test


def known_keys(test: dict) -> list[int]:
    return sorted(int(key) for key in test["keys"])


def history_path(source) -> Path:
    """history.jsonl of a run directory (or the path itself), which must exist."""
    path = Path(source)
    history = path / "history.jsonl" if path.is_dir() else path
    if not history.is_file():
        raise GregorError(f"{history} not found: `gregor check` needs a run directory holding history.jsonl")
    return history


def load(source, spark: SparkSession, test: dict | None = None, fast: bool = True) -> Tables:
    """Loads a run directory (or a history.jsonl path) into validated Tables.

    The rows come from checkers/fastload.py when it takes the history (every
    well-formed history without a torn tail), else from the SQL load here,
    which also names the first bad line. `fast=False` always uses the SQL
    load. Raises GregorError naming the first bad line; nothing is written.
    """
    history = history_path(source)
    directory = history.parent
    if test is None:
        test = read_test(directory)
    keys = known_keys(test)
    torn = torn_tail(history)
    if fast and not torn:
        with parse_cache(spark) as cache:
            rows = fast_rows(spark, history, keys, cache)
            tables = None if rows is None else _stored(rows, spark, history, test, torn, name_problems=False)
        if tables is not None:
            if not tables.metrics["problems"]:
                return tables
            tables.release()  # the file changed between the fast load's passes
    return _stored(sql_rows(spark, history, keys, torn), spark, history, test, torn)


def sql_rows(spark: SparkSession, history: Path, keys: list[int], torn: int) -> DataFrame:
    """The table's rows by Spark SQL: from_json, a window per process, and SQL expressions."""
    return _rows(paired_events(numbered_events(spark, history, drop_last=torn > 0)), keys).drop("_pos", "_mpos")


def _stored(
    rows: DataFrame, spark: SparkSession, history: Path, test: dict, torn: int, name_problems: bool = True
) -> Tables:
    """Shuffles the rows by route, stores them and counts the metrics (one
    job); raises GregorError for the first problem row if `name_problems`."""
    directory = history.parent
    rows = rows.where(F.col("kind").isNotNull())
    storage = storage_level(history)
    partitions = _partitions(spark, history)
    shuffled = rows.repartition(partitions, "route")
    table = stored_rows(shuffled, storage) if storage == STORAGE else shuffle_rows(shuffled)
    try:
        # The job that stores the table (for a large history: runs its shuffle,
        # whose files are the table) also counts, over the table's rows: an
        # Observation on the rows before the shuffle cost a seventh of the
        # load (an uncompiled operator that also splits the compiled stage).
        # (spark_partition_id may not stand inside an aggregate: it is projected first.)
        counted = table.select("*", F.spark_partition_id().alias(PART)).agg(*_metric_columns(partitions)).collect()[0]
        metrics = {name: int(counted[name] or 0) for name in counted.asDict()}
        metrics["op_partitions"] = _op_partitions(metrics, partitions)
        metrics["torn_tail"] = torn
        if metrics["problems"] and name_problems:
            raise _first_problem(table, history)
    except BaseException:
        free_rows(table)
        raise
    return Tables(spark=spark, test=test, rows=table, metrics=metrics, directory=directory, storage=storage)


def stored_rows(frame: DataFrame, storage: StorageLevel) -> DataFrame:
    """`frame`'s rows kept for the rest of the check: a local checkpoint,
    stored at `storage` by the first job that reads it (free it with
    `free_rows`). Spark's cache (`persist`) would first build column batches
    of every row: at 1M events that took 2 s more than the rows themselves,
    and 168 MiB on disk against 68 (docs/CHECKERS.md). Planned without
    adaptive execution, whose plan reports no partitioning: the checkpoint
    then keeps the one by route, and no later pass by route shuffles."""
    with session_conf(frame.sparkSession, "spark.sql.adaptive.enabled", "false"):
        return frame.localCheckpoint(eager=False, storageLevel=storage)


def shuffle_rows(frame: DataFrame) -> DataFrame:
    """`frame`, which ends in a shuffle, as a table over that shuffle's own
    output: the first job writes the shuffle's files, and every later job
    reads them instead of shuffling again (free them with `free_rows`).

    For a large history: stored on disk, the loaded table was a second copy
    of rows the shuffle had just written to disk; without it the 10M txn
    check takes 8% less time, side by side (docs/CHECKERS.md). Planned without adaptive
    execution, as `stored_rows`, so that the table keeps its partitioning by
    route. On a cluster, an executor lost with its files costs a rerun of
    the shuffle's map stage, where a lost checkpoint failed the check."""
    spark = frame.sparkSession
    with session_conf(spark, "spark.sql.adaptive.enabled", "false"):
        jdf = frame._jdf
        module = getattr(spark._jvm.org.apache.spark.sql.execution, "LogicalRDD$").__getattr__("MODULE$")
        plan = module.fromDataset(jdf.queryExecution().toRdd(), jdf, False, True)
        return DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(jdf.sparkSession(), plan), spark)


def free_rows(frame: DataFrame, wait: bool = False) -> None:
    """Frees what `stored_rows` stored (DataFrame.unpersist does not free a
    checkpoint), or the files of the shuffle `shuffle_rows` reads; with
    `wait`, returns once they are gone."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.nodeName() != "LogicalRDD":
        return
    rdd = plan.rdd()
    rdd.unpersist(wait)
    shuffle = read_shuffle(rdd)
    cleaner = rdd.sparkContext().cleaner()
    # No cleaner: Spark was told not to clean (spark.cleaner.referenceTracking).
    if shuffle is not None and cleaner.isDefined():
        cleaner.get().doCleanupShuffle(shuffle, wait)


def read_shuffle(rdd) -> int | None:
    """The id of the shuffle whose output a JVM RDD reads, through its
    narrow dependencies (None: it reads none; a stored table's RDD reads its
    blocks)."""
    while not (rdd.getStorageLevel().useDisk() or rdd.getStorageLevel().useMemory()):
        dependencies = rdd.dependencies()
        if dependencies.size() != 1:
            return None
        dependency = dependencies.apply(0)
        if dependency.getClass().getSimpleName() == "ShuffleDependency":
            return dependency.shuffleId()
        rdd = dependency.rdd()
    return None


def _partitions(spark: SparkSession, history: Path) -> int:
    cores = max(1, spark.sparkContext.defaultParallelism)
    wanted = max(1, math.ceil(history.stat().st_size / BYTES_PER_PARTITION))
    return cores * math.ceil(wanted / cores)


def long_array(values: list) -> F.Column:
    """An array<bigint> literal made in one call: one F.lit per element costs a
    JVM round trip each (thousands of them took 20 s in the cycle search)."""
    return F.expr("cast(array(" + ", ".join(str(int(v)) for v in values) + ") as array<bigint>)")


def torn_tail(history: Path, chunk: int = 1 << 16) -> int:
    """Bytes of a last line cut off mid-write (0 if none).

    The writer appends each event with one write, but a SIGKILL can stop a
    write that spans a page boundary halfway, leaving an unterminated line
    that is not JSON. Such a tail is what a crash leaves and is left out; an
    unterminated last line that parses is an event like any other.
    """
    with history.open("rb") as handle:
        end = handle.seek(0, 2)
        tail = b""
        while end > 0 and b"\n" not in tail:
            start = max(0, end - chunk)
            handle.seek(start)
            tail = handle.read(end - start) + tail
            end = start
    tail = tail[tail.rfind(b"\n") + 1 :]
    if not tail.strip():
        return 0
    try:
        json.loads(tail)
    except ValueError:
        return len(tail)
    return 0


def numbered_events(spark: SparkSession, history: Path, drop_last: bool = False) -> DataFrame:
    """Parses each line, keeping its 1-based line number (`line`) and whether it is blank.

    Line numbers come from monotonically_increasing_id (partition id in the
    high bits) plus the row counts of earlier partitions: no Python rows.
    `drop_last` leaves out the last line (a torn tail, see torn_tail).
    """
    text = spark.read.text(str(history)).withColumn("_id", F.monotonically_increasing_id())
    if text.rdd.getNumPartitions() <= 1 and not drop_last:
        counts = {0: 0}  # one partition: the row number is the line number, no counting job
    else:
        counts = dict(
            (row["pid"], row["n"])
            for row in text.groupBy(F.shiftright(F.col("_id"), 33).alias("pid"))
            .agg(F.count(F.lit(1)).alias("n"))
            .collect()
        )
    starts, total = [], 0
    for pid in range(max(counts, default=-1) + 1):
        starts.append(total)
        total += counts.get(pid, 0)
    pid = F.shiftright(F.col("_id"), 33)
    within = F.col("_id") - F.shiftleft(pid, 33)
    start = F.element_at(long_array(starts or [0]), (pid + 1).cast("int"))
    parsed = F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    numbered = text.withColumn("line", start + within + 1)
    if drop_last:
        numbered = numbered.where(F.col("line") < total)
    return numbered.select("line", (F.trim(F.col("value")) == "").alias("blank"), parsed.alias("e")).select(
        "line", "blank", "e.*"
    )


def paired_events(events: DataFrame) -> DataFrame:
    """Adds, per process in index order, the previous and next event's facts,
    and the running facts of the process before each event.

    One process never has two ops in flight, so a completion's invoke is the
    event of the same process just before it. `seg` counts the process's
    assign/subscribe ops so far (each resets positions and send order);
    `own_init` is its latest `ok` init (the instance its transactions belong
    to when they carry no epoch). Both windows share one sort.
    """
    w = "over (partition by process order by index)"
    before = "over (partition by process order by index rows between unbounded preceding and 1 preceding)"
    paired = events.selectExpr(
        "*",
        *[f"lag({c}) {w} as prev_{c}" for c in ("type", "index", "time", "f", "txn_id", "group", "keys")],
        f"lag(type, 2) {w} as prev2_type",
        f"lag(time, 2) {w} as prev2_time",
        f"lead(type) {w} as next_type",
        f"lead(line) {w} as next_line",
    )
    completion = f"type != '{INVOKE}'"
    resets = ", ".join(f"'{f}'" for f in RESETS)
    init = (
        f"{completion} and type = '{OK}' and f = '{INIT}' and epoch is not null"
        " and coalesce(txn_id, prev_txn_id) is not null"
    )
    return paired.selectExpr(
        "*",
        f"coalesce(sum(case when {completion} and f in ({resets}) then 1 else 0 end) {before}, 0) as seg",
        f"last(case when {init} then named_struct('epoch', epoch, 'producer_id', producer_id) end, true) {before}"
        " as own_init",
    )


def _sql(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _first(conditions, otherwise: str = "null") -> str:
    """SQL: the value of the first condition that holds."""
    return "case " + " ".join(f"when {c} then {v}" for c, v in conditions) + f" else {otherwise} end"


LINE_PROBLEM = _first(
    [
        ("blank", _sql("empty line (history.jsonl holds one JSON event per line)")),
        (f"{CORRUPT} is not null", "'CORRUPT'"),
        ("index is null", _sql('missing "index"')),
        (
            "index != line - 1",
            "format_string("
            + _sql("index %d where %d was expected (indices run 0, 1, 2, ... one per line)")
            + ", index, line - 1)",
        ),
        ("time is null", _sql('missing "time" (nanoseconds)')),
        ("process is null", _sql('missing "process"')),
        (
            f"not (process rlike '^-?[0-9]+$' or process = '{NEMESIS}')",
            _sql('"process" must be an integer or "nemesis"'),
        ),
        (
            "type is null or type not in (" + ", ".join(f"'{t}'" for t in TYPES) + ")",
            _sql('"type" must be one of invoke, ok, fail, info'),
        ),
        ("f is null", _sql('missing "f"')),
    ]
)
PAIR_PROBLEM = _first(
    [
        (
            f"type != '{INVOKE}' and (prev_type is null or prev_type != '{INVOKE}')",
            "format_string(" + _sql("a %s completion of process %s with no invoke before it") + ", type, process)",
        ),
        (
            f"type != '{INVOKE}' and prev_f != f",
            "format_string(" + _sql("completion f %s does not match its invoke's f %s") + ", f, prev_f)",
        ),
        (
            f"type = '{INVOKE}' and next_type = '{INVOKE}'",
            "format_string("
            + _sql("process %s invokes again at line %d before this op completed")
            + ", process, next_line)",
        ),
    ]
)
# Checks of one mop `m`, in the order their messages are preferred.
MOP_CHECKS = (
    ("m.f is null or m.f not in ('send', 'poll', 'commit')", 'a mop whose "f" is not send, poll or commit'),
    ("m.f = 'send' and (m.key is null or m.value is null)", 'a send mop without "key" or "value"'),
    (
        "m.f = 'poll' and m.key is not null and (m.value is null or m.offset is null)",
        'a poll mop with a "key" but no "offset" or "value"',
    ),
    ("m.f = 'commit' and (m.key is null or m.offset is null)", 'a commit mop without "key" or "offset"'),
    ("m.from is not null and size(m.from) != 2", 'a "from" that is not [key, value]'),
)


def _unknown_key_message(key: str) -> str:
    return f"concat('key ', cast({key} as string), ' is not in test.json \"keys\"')"


def _rows(paired: DataFrame, keys: list[int]) -> DataFrame:
    """Every line as its rows: the op (element 0 of `_pos`), its mops (1..n),
    then markers behind the element they belong to (`_mpos` 1..).

    Written as SQL text: one call builds each step, and each step names its
    columns so no big expression is copied into the next one.
    """
    mop_type = "struct<f:string,key:bigint,value:bigint,offset:bigint,poll:int,from:array<bigint>>"
    mops = f"coalesce(mops, cast(array() as array<{mop_type}>))"
    cut = f"(type = '{INVOKE}' and next_type is null)"
    n_sends = f"size({mops}.f) - size(array_remove({mops}.f, 'send'))"
    staged = paired.selectExpr(
        "*",
        f"(type != '{INVOKE}' or {cut}) as _real",
        f"{cut} as _cut",
        f"{n_sends} as n_sends",
        f"case when f = '{TXN}' then size(array_distinct(transform(filter({mops}, m -> m.f = 'send'), m -> m.key)))"
        f" else least({n_sends}, 1) end as n_send_keys",
        f"case when type = '{OK}' and array_contains({mops}.f, 'poll')"
        f" then exists({mops}, m -> m.f = 'poll' and m.key is not null) else false end as reads",
        "flatten(transform(rebalance, r -> coalesce(r.keys, cast(array() as array<bigint>)))) as _rebalance_keys",
    )

    # Every row of a line is one element (_pos, _mpos, m, marker_key) of one
    # array, exploded by one generator: the op (0, 0), its mops (i, 0), the
    # rebalance markers (0, j) and a copier send's input marker (i, 1).
    # (A second generator over every row for the rare markers cost more.)
    def element(pos: str, mpos: str, mop: str, marker: str) -> str:
        return f"named_struct('p', {pos}, 'mp', {mpos}, 'm', {mop}, 'k', {marker})"

    no_mop, no_key = f"cast(null as {mop_type})", "cast(null as bigint)"
    no_elements = f"cast(array() as array<struct<p:int,mp:int,m:{mop_type},k:bigint>>)"
    kept_mop = "x.f in ('send', 'poll', 'commit') and not (x.f = 'poll' and x.key is null)"
    elements = (
        f"concat(array({element('0', '0', no_mop, no_key)}),"
        f" transform({mops}, (x, i) -> {element('i + 1', '0', 'x', no_key)}),"
        f" case when _real and rebalance is not null"
        f" then transform(_rebalance_keys, (k, j) -> {element('0', 'j + 1', no_mop, 'k')}) else {no_elements} end,"
        f" case when _real then filter(transform({mops}, (x, i) -> {element('i + 1', '1', 'x', 'x.from[0]')}),"
        f" e -> {kept_mop.replace('x.', 'e.m.')} and e.m.f = 'send' and size(e.m.from) = 2) else {no_elements} end)"
    )
    kept = "_pos > 0 and _real and m.f in ('send', 'poll', 'commit') and not (m.f = 'poll' and m.key is null)"
    rows = staged.selectExpr("*", f"inline({elements}) as (_pos, _mpos, m, marker_key)").selectExpr(
        "*", f"{kept} as _kept"
    )
    known = "array(" + ", ".join(f"cast({k} as bigint)" for k in keys) + ")"
    in_known = ", ".join(str(k) for k in keys)
    op_elem, mop_elem = "(_pos = 0 and _mpos = 0)", "(_pos > 0 and _mpos = 0)"
    mop_rank = _first(
        [(check, str(rank)) for rank, (check, _) in enumerate(MOP_CHECKS, start=1)]
        + [(f"m.key is not null and m.key not in ({in_known})", str(UNKNOWN_IN_MOPS))]
    )
    checked = rows.selectExpr(
        "*",
        f"{op_elem} as _op_elem",
        f"case when {op_elem} then {LINE_PROBLEM} end as _line_problem",
        f"case when {op_elem} then {PAIR_PROBLEM} end as _pair_problem",
        f"case when {op_elem} and keys is not null then try_element_at(array_except(keys, {known}), 1) end"
        " as _unknown_key",
        f"case when {op_elem} and rebalance is not null then try_element_at(array_except(_rebalance_keys, {known}), 1)"
        " end as _unknown_rebalanced",
        f"case when {mop_elem} then {mop_rank} end as _mop_rank",
    )
    ranked = checked.selectExpr(
        "*",
        _first(
            [
                ("_line_problem is not null", "0"),
                ("_unknown_key is not null", str(UNKNOWN_IN_KEYS)),
                ("_unknown_rebalanced is not null", str(UNKNOWN_IN_REBALANCE)),
                ("_pair_problem is not null", str(PAIR_RANK)),
            ],
            "_mop_rank",
        )
        + " as _rank",
    )
    message = _first(
        [
            ("_rank = 0", "_line_problem"),
            (f"_rank = {UNKNOWN_IN_KEYS}", _unknown_key_message("_unknown_key")),
            (f"_rank = {UNKNOWN_IN_REBALANCE}", _unknown_key_message("_unknown_rebalanced")),
            (f"_rank = {PAIR_RANK}", "_pair_problem"),
            (f"_rank = {UNKNOWN_IN_MOPS}", _unknown_key_message("m.key")),
        ]
        + [(f"_rank = {n}", _sql(text)) for n, (_, text) in enumerate(MOP_CHECKS, start=1)]
    )
    kind = _first(
        [
            ("_rank is not null", str(PROBLEM_ROW)),
            ("_op_elem and _real", str(OP_ROW)),
            (
                "_kept and _mpos = 0",
                f"case m.f when 'send' then {SEND_ROW} when 'poll' then {POLL_ROW} else {COMMIT_ROW} end",
            ),
            ("_mpos > 0 and _pos = 0", str(REBALANCE_ROW)),
            ("_mpos > 0", str(FROM_ROW)),
        ]
    )
    rows = ranked.selectExpr(
        "*", f"cast({kind} as int) as _kind", f"case when _rank is not null then {message} end as _message"
    )
    route = _first(
        [
            (f"_kind = {PROBLEM_ROW}", str(PROBLEM_ROUTE)),
            (
                f"_kind = {OP_ROW}",
                f"case when process = '{NEMESIS}' then {NEMESIS_ROUTE} else -2 - cast(process as bigint) end",
            ),
            (f"_kind in ({REBALANCE_ROW}, {FROM_ROW})", "marker_key"),
        ],
        "m.key",
    )
    # Two ops of a process that touch within a nanosecond are the only way a
    # process edge can fail to move forward in time (checkers/cycles.py).
    tight = (
        f"case when _cut then prev_type != '{INVOKE}' and time - prev_time <= 1"
        f" else prev2_type != '{INVOKE}' and prev_time - prev2_time <= 1 end"
    )
    # Key rows carry numbers only (the per-key pass reads nothing else); the
    # op's text and arrays live once, on its op row. Copying them onto every
    # mop row made the table about twice as wide to shuffle and to store.
    op_only = f"_kind = {OP_ROW}"
    key_only = f"_kind in ({', '.join(str(k) for k in KEY_KINDS)})"

    def on_ops(expression: str, name: str) -> str:
        return f"case when {op_only} then {expression} end as {name}"

    def on_keys(expression: str, name: str) -> str:
        return f"case when {key_only} then {expression} end as {name}"

    type_ = f"case when _cut then '{INFO}' else type end"
    group = "coalesce(`group`, prev_group)"
    return rows.selectExpr(
        "_kind as kind",
        f"cast({route} as bigint) as route",
        "index as op",
        "cast(_pos - 1 as int) as mop_index",
        f"case when _kind in ({REBALANCE_ROW}, {FROM_ROW}) then marker_key else m.key end as key",
        "m.value as value",
        "m.offset as offset",
        "m.poll as poll",
        "m.from[0] as from_key",
        "m.from[1] as from_value",
        on_ops("process", "process"),
        f"case when process = '{NEMESIS}' then -1 else cast(process as bigint) end as pid",
        on_ops("f", "f"),
        on_ops(type_, "type"),
        on_keys(
            f"case {type_} when '{OK}' then {OK_CODE} when '{FAIL}' then {FAIL_CODE} else {INFO_CODE} end", "tcode"
        ),
        on_keys(f"f = '{TXN}'", "is_txn"),
        on_ops("case when _cut then index else prev_index end", "invoke_index"),
        "case when _cut then time else prev_time end as invoke_time",
        "case when _cut then cast(null as bigint) else time end as complete_time",
        on_ops("error", "error"),
        on_ops("coalesce(txn_id, prev_txn_id)", "txn_id"),
        on_ops("producer_id", "producer_id"),
        on_ops("epoch", "epoch"),
        "commit_time",
        on_ops(group, "`group`"),
        f"case when {group} is not null then xxhash64({group}) end as gid",
        on_ops("coalesce(auto, false)", "auto"),
        on_ops("coalesce(keys, prev_keys)", "keys"),
        on_ops("rebalance", "rebalance"),
        on_ops(f"case when process = '{NEMESIS}' then value end", "value_json"),
        on_ops("_cut", "cut_short"),
        "n_sends",
        "n_send_keys",
        "reads",
        "seg",
        on_ops("own_init.epoch", "own_epoch"),
        on_ops("own_init.producer_id", "own_producer_id"),
        f"case when _kind in ({OP_ROW}, {PROBLEM_ROW}) then line end as line",
        f"case when _kind = {PROBLEM_ROW} then _rank end as problem_rank",
        f"case when _kind = {PROBLEM_ROW} then _message end as problem",
        f"case when _kind = {PROBLEM_ROW} then {CORRUPT} end as text",
        f"case when _kind = {OP_ROW} then {tight} end as _tight",
        "_pos",
        "_mpos",
    )


def _metric_columns(partitions: int) -> list[F.Column]:
    """What the load counts, over the stored table (kind is never null there).

    `events` is the last line's number: every line is an event, and the last
    one always leaves a row (a completion, or an invoke cut short, is an op
    row; a bad line a problem row). `_tight` is kept in the table for this.
    `_op_parts_J` are bitmaps of the table's partitions 64 J to 64 J + 63
    that hold client op rows (`_op_partitions`).
    """
    client_op = f"kind = {OP_ROW} and process != '{NEMESIS}'"
    part = PART
    op_parts = [
        F.expr(f"bit_or(case when {client_op} and {part} div 64 = {j} then shiftleft(1L, {part} % 64) end)").alias(
            f"{OP_PARTS}{j}"
        )
        for j in range(math.ceil(partitions / 64))
    ]
    counts = {
        "problems": f"kind = {PROBLEM_ROW}",
        "ops": client_op,
        "ok": f"{client_op} and type = '{OK}'",
        "info": f"{client_op} and type = '{INFO}'",
        "fail": f"{client_op} and type = '{FAIL}'",
        "cut_short": f"{client_op} and cut_short",
        "info_txn_sends": f"kind = {SEND_ROW} and tcode = {INFO_CODE} and is_txn",
        "ok_inits": f"kind = {OP_ROW} and f = '{INIT}' and type = '{OK}' and epoch is not null and txn_id is not null",
        "derived_sends": f"kind = {SEND_ROW} and from_key is not null",
        "ok_commits": f"kind = {COMMIT_ROW} and tcode = {OK_CODE} and gid is not null",
        "rebalance_markers": f"kind = {REBALANCE_ROW}",
        "resets": f"kind = {OP_ROW} and f in ('{ASSIGN}', '{SUBSCRIBE}')",
        "tight": "_tight",
    }
    return (
        [F.expr("max(line)").alias("events")]
        + [F.expr(f"sum(case when {condition} then 1 else 0 end)").alias(name) for name, condition in counts.items()]
        + [
            F.expr(f"min(case when kind = {OP_ROW} then least(invoke_time, complete_time) end)").alias("first_time"),
            F.expr(f"max(case when kind = {OP_ROW} then greatest(invoke_time, complete_time) end)").alias("last_time"),
        ]
        + _key_row_ranges()
        + op_parts
    )


def _key_row_ranges() -> list[F.Column]:
    """The ranges checkers/packed_order.py packs, over the key rows (0 when none has one)."""
    key_row = "kind in (" + ", ".join(str(kind) for kind in KEY_KINDS) + ")"
    return [
        F.expr(f"{edge}(case when {key_row} then {name} end)").alias(f"{edge}_{name}")
        for name in RANGED_COLUMNS
        for edge in ("min", "max")
    ]


OP_PARTS = "_op_parts_"
PART = "_partition"


def _op_partitions(metrics: dict, partitions: int) -> list[int]:
    """The partitions of the stored table that hold client op rows, from
    the metrics' bitmaps (which it takes out of `metrics`). The op rows'
    routes are their processes', a few of the table's routes: the stats
    read those partitions only (routes.rows_in_partitions)."""
    found = []
    for j in range(math.ceil(partitions / 64)):
        bits = metrics.pop(f"{OP_PARTS}{j}") & (2**64 - 1)
        found += [64 * j + i for i in range(64) if bits >> i & 1]
    return found


def _first_problem(table: DataFrame, history: Path) -> GregorError:
    """The error for the first bad line: problems of a line itself come
    first (a broken line also breaks pairing after it), then pairing."""
    problems = table.where(F.col("kind") == PROBLEM_ROW)
    first = (
        problems.orderBy((F.col("problem_rank") >= PAIR_RANK), "line", "problem_rank", "mop_index")
        .select("line", "problem", "text")
        .limit(1)
        .collect()
    )
    row = first[0]
    problem = diagnose_line(row["text"]) if row["problem"] == "CORRUPT" else row["problem"]
    return GregorError(f"{history} line {row['line']}: {problem}")


def diagnose_line(text: str) -> str:
    """Says in words why one line did not fit the history schema (driver side, one line only)."""
    try:
        event = json.loads(text)
    except ValueError as error:
        return f"malformed JSON ({getattr(error, 'msg', error)} at column {getattr(error, 'colno', '?')})"
    if not isinstance(event, dict):
        return "not a JSON object"
    integers = ("index", "time", "producer_id", "epoch", "commit_time")
    for name in integers:
        if (
            name in event
            and event[name] is not None
            and (not isinstance(event[name], int) or isinstance(event[name], bool))
        ):
            return f'"{name}" must be an integer, got {json.dumps(event[name])[:40]}'
    if "mops" in event and event["mops"] is not None:
        if not isinstance(event["mops"], list):
            return '"mops" must be a list'
        for number, mop in enumerate(event["mops"]):
            if not isinstance(mop, dict):
                return f"mop {number} is not a JSON object"
            for name in ("key", "value", "offset", "poll"):
                if mop.get(name) is not None and (not isinstance(mop[name], int) or isinstance(mop[name], bool)):
                    return f'mop {number}: "{name}" must be an integer, got {json.dumps(mop[name])[:40]}'
    for name in ("keys",):
        if event.get(name) is not None and not (
            isinstance(event[name], list) and all(isinstance(k, int) for k in event[name])
        ):
            return f'"{name}" must be a list of integer keys'
    if event.get("rebalance") is not None and not isinstance(event["rebalance"], list):
        return '"rebalance" must be a list of {"type", "keys"}'
    return "a field has the wrong type for a history event"


def ops_with_mops(spark: SparkSession, source) -> DataFrame:
    """One row per op with its raw `mops` array, for the exports (which write
    whole ops, not rows). Parses the history again: exports are rare."""
    history = history_path(source)
    paired = paired_events(numbered_events(spark, history, drop_last=torn_tail(history) > 0))
    is_invoke = F.col("type") == INVOKE
    cut = is_invoke & F.col("next_type").isNull()
    return paired.where(~is_invoke | cut).select(
        F.col("index").alias("op"),
        F.when(cut, F.col("index")).otherwise(F.col("prev_index")).alias("invoke_index"),
        "process",
        "f",
        F.when(cut, F.lit(INFO)).otherwise(F.col("type")).alias("type"),
        F.when(cut, F.col("time")).otherwise(F.col("prev_time")).alias("invoke_time"),
        F.when(cut, F.lit(None).cast("long")).otherwise(F.col("time")).alias("complete_time"),
        "error",
        F.coalesce("keys", "prev_keys").alias("keys"),
        F.when(F.col("process") == NEMESIS, F.col("value")).alias("value_json"),
        cut.alias("cut_short"),
        "mops",
    )
