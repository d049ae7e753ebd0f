"""From history.jsonl + test.json to the Tables every finder works on.

Everything stays in Spark: the history is numbered, parsed with an explicit
schema, validated and paired without ever being collected to the driver.
Only the first bad line (if any) comes back, to name it in a one-line error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.errors import GregorError

CORRUPT = "_corrupt_record"

MOP_SCHEMA = T.StructType([
    T.StructField("f", T.StringType()),
    T.StructField("key", T.LongType()),
    T.StructField("value", T.LongType()),
    T.StructField("offset", T.LongType()),
    T.StructField("poll", T.IntegerType()),
    T.StructField("from", T.ArrayType(T.LongType())),
])

REBALANCE_SCHEMA = T.StructType([
    T.StructField("type", T.StringType()),
    T.StructField("keys", T.ArrayType(T.LongType())),
])

EVENT_SCHEMA = T.StructType([
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
])

TYPES = ("invoke", "ok", "fail", "info")
MOP_FS = ("send", "poll", "commit")
STORAGE = StorageLevel.MEMORY_AND_DISK


@dataclass
class Tables:
    """The loaded run: see docs/CHECKERS.md for every column."""

    spark: SparkSession
    test: dict
    events: DataFrame
    ops: DataFrame
    mops: DataFrame
    directory: Path | None = None
    cache: dict = field(default_factory=dict)


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
        raise GregorError(f"{path}: needs \"keys\", an object mapping each key to [topic, partition]")
    for key in keys:
        try:
            int(key)
        except ValueError as error:
            raise GregorError(f"{path}: key {key!r} in \"keys\" is not an integer") from error
    return test


def known_keys(test: dict) -> list[int]:
    return sorted(int(key) for key in test["keys"])


def load(source, spark: SparkSession, test: dict | None = None) -> Tables:
    """Loads a run directory (or a history.jsonl path) into validated Tables.

    Raises GregorError naming the first bad line; nothing is written.
    """
    path = Path(source)
    history = path / "history.jsonl" if path.is_dir() else path
    directory = history.parent
    if not history.is_file():
        raise GregorError(f"{history} not found: `gregor check` needs a run directory holding history.jsonl")
    if test is None:
        test = read_test(directory)
    keys = known_keys(test)
    events = _numbered_events(spark, history)
    # Checkpoints, not persist: they cut the lineage, so later plans stay small.
    paired = _pair(events).localCheckpoint(eager=True)
    _validate(paired, keys, history)
    ops = _ops(paired).localCheckpoint(eager=True)
    mops = _mops(ops, paired).localCheckpoint(eager=True)
    return Tables(spark=spark, test=test, events=paired, ops=ops, mops=mops, directory=directory)


def _numbered_events(spark: SparkSession, history: Path) -> DataFrame:
    """Parses each line, keeping its 1-based line number (`line`) and whether it is blank.

    Line numbers come from monotonically_increasing_id (partition id in the
    high bits) plus the row counts of earlier partitions: no Python rows.
    """
    text = spark.read.text(str(history)).withColumn("_id", F.monotonically_increasing_id())
    if text.rdd.getNumPartitions() <= 1:
        counts = {0: 0}  # one partition: the row number is the line number, no counting job
    else:
        counts = dict(
            (row["pid"], row["n"])
            for row in text.groupBy(F.shiftright(F.col("_id"), 33).alias("pid"))
            .agg(F.count(F.lit(1)).alias("n")).collect()
        )
    starts, total = [], 0
    for pid in range(max(counts, default=-1) + 1):
        starts.append(total)
        total += counts.get(pid, 0)
    pid = F.shiftright(F.col("_id"), 33)
    within = F.col("_id") - F.shiftleft(pid, 33)
    start = F.element_at(F.array(*[F.lit(s) for s in starts] or [F.lit(0)]).cast("array<long>"), (pid + 1).cast("int"))
    parsed = F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    return (text.withColumn("line", start + within + 1)
            .select("line", (F.trim(F.col("value")) == "").alias("blank"), parsed.alias("e"))
            .select("line", "blank", "e.*"))


def _pair(events: DataFrame) -> DataFrame:
    """Adds, per process in index order, the previous and next event's facts.

    One process never has two ops in flight, so a completion's invoke is the
    event of the same process just before it.
    """
    w = Window.partitionBy("process").orderBy("index")
    return (events
            .withColumn("prev_type", F.lag("type").over(w))
            .withColumn("prev_index", F.lag("index").over(w))
            .withColumn("prev_time", F.lag("time").over(w))
            .withColumn("prev_f", F.lag("f").over(w))
            .withColumn("prev_txn_id", F.lag("txn_id").over(w))
            .withColumn("prev_group", F.lag("group").over(w))
            .withColumn("prev_keys", F.lag("keys").over(w))
            .withColumn("next_type", F.lead("type").over(w))
            .withColumn("next_line", F.lead("line").over(w)))


def _first(conditions) -> F.Column:
    """The message of the first condition that holds, else null."""
    expr = None
    for condition, message in conditions:
        expr = F.when(condition, message) if expr is None else expr.when(condition, message)
    return expr.otherwise(F.lit(None))


def _row_problem(keys: list[int], detailed: bool = True) -> F.Column:
    """What is wrong with a line itself; with ``detailed`` false, a cheap
    stand-in that is non-null on exactly the same rows."""
    known = F.array(*[F.lit(k).cast("long") for k in keys])
    mops = F.coalesce(F.col("mops"), F.array().cast(T.ArrayType(MOP_SCHEMA)))

    def any_mop(pred):
        return F.exists(mops, pred)

    def unknown(k):
        return k.isNotNull() & ~F.array_contains(known, k)

    rebalance_keys = F.flatten(F.transform(F.coalesce(F.col("rebalance"), F.array().cast(T.ArrayType(REBALANCE_SCHEMA))),
                                           lambda r: F.coalesce(r["keys"], F.array().cast("array<long>"))))
    first_unknown = F.coalesce(
        F.try_element_at(F.filter(F.transform(mops, lambda m: m["key"]), unknown), F.lit(1)),
        F.try_element_at(F.filter(F.coalesce(F.col("keys"), F.array().cast("array<long>")), unknown), F.lit(1)),
        F.try_element_at(F.filter(rebalance_keys, unknown), F.lit(1)),
    )
    mop_checks = [
        (lambda m: m["f"].isNull() | ~m["f"].isin(*MOP_FS),
         F.lit("a mop whose \"f\" is not send, poll or commit")),
        (lambda m: (m["f"] == "send") & (m["key"].isNull() | m["value"].isNull()),
         F.lit("a send mop without \"key\" or \"value\"")),
        (lambda m: (m["f"] == "poll") & m["key"].isNotNull() & (m["value"].isNull() | m["offset"].isNull()),
         F.lit("a poll mop with a \"key\" but no \"offset\" or \"value\"")),
        (lambda m: (m["f"] == "commit") & (m["key"].isNull() | m["offset"].isNull()),
         F.lit("a commit mop without \"key\" or \"offset\"")),
        (lambda m: m["from"].isNotNull() & (F.size(m["from"]) != 2),
         F.lit("a \"from\" that is not [key, value]")),
    ]
    # Array functions run interpreted, one pass each: a single pass over the
    # mops (and the rarely present keys/rebalance) finds the few suspect rows,
    # and only those are asked which problem comes first.
    suspect = (any_mop(lambda m: reduce(lambda a, b: a | b, [check(m) for check, _ in mop_checks] + [unknown(m["key"])]))
               | (F.col("keys").isNotNull() & F.exists(F.col("keys"), unknown))
               | (F.col("rebalance").isNotNull() & F.exists(rebalance_keys, unknown)))
    # first_unknown appears once: Spark hoists a repeated subexpression and would run it on every row.
    detail = _first([(any_mop(check), message) for check, message in mop_checks] + [
        (F.lit(True), F.concat(F.lit("key "), first_unknown.cast("string"), F.lit(" is not in test.json \"keys\"")))])
    return _first([
        (F.col("blank"), F.lit("empty line (history.jsonl holds one JSON event per line)")),
        (F.col(CORRUPT).isNotNull(), F.lit("CORRUPT")),
        (F.col("index").isNull(), F.lit("missing \"index\"")),
        (F.col("index") != F.col("line") - 1,
         F.format_string("index %d where %d was expected (indices run 0, 1, 2, ... one per line)",
                         F.col("index"), F.col("line") - 1)),
        (F.col("time").isNull(), F.lit("missing \"time\" (nanoseconds)")),
        (F.col("process").isNull(), F.lit("missing \"process\"")),
        (~(F.col("process").rlike("^-?[0-9]+$") | (F.col("process") == "nemesis")),
         F.lit("\"process\" must be an integer or \"nemesis\"")),
        (F.col("type").isNull() | ~F.col("type").isin(*TYPES),
         F.lit("\"type\" must be one of invoke, ok, fail, info")),
        (F.col("f").isNull(), F.lit("missing \"f\"")),
        (suspect, detail if detailed else F.lit("suspect")),
    ])


def _pair_problem() -> F.Column:
    completion = F.col("type") != "invoke"
    return _first([
        (completion & (F.col("prev_type").isNull() | (F.col("prev_type") != "invoke")),
         F.format_string("a %s completion of process %s with no invoke before it", F.col("type"), F.col("process"))),
        (completion & (F.col("prev_f") != F.col("f")),
         F.format_string("completion f %s does not match its invoke's f %s", F.col("f"), F.col("prev_f"))),
        ((F.col("type") == "invoke") & (F.col("next_type") == "invoke"),
         F.format_string("process %s invokes again at line %d before this op completed",
                         F.col("process"), F.col("next_line"))),
    ])


def _validate(paired: DataFrame, keys: list[int], history: Path) -> None:
    pair_problem = _pair_problem()
    # Array functions in a CASE run slowly on every row: the cheap stand-in
    # picks the (usually no) bad lines first, and only they get their message.
    suspects = paired.where(_row_problem(keys, detailed=False).isNotNull() | pair_problem.isNotNull())
    suspects = suspects.localCheckpoint(eager=True)
    row_problem = _row_problem(keys)
    flagged = (suspects.select("line", F.col(CORRUPT).alias("text"), row_problem.alias("row_problem"), pair_problem.alias("pair_problem"))
               .where(F.col("row_problem").isNotNull() | F.col("pair_problem").isNotNull()))
    # Problems of a line itself come first: a broken line also breaks pairing after it.
    first = (flagged.orderBy(F.col("row_problem").isNull(), "line").limit(1).collect())
    if not first:
        return
    row = first[0]
    problem = row["row_problem"] or row["pair_problem"]
    if problem == "CORRUPT":
        problem = diagnose_line(row["text"])
    raise GregorError(f"{history} line {row['line']}: {problem}")


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
        if name in event and event[name] is not None and (not isinstance(event[name], int) or isinstance(event[name], bool)):
            return f"\"{name}\" must be an integer, got {json.dumps(event[name])[:40]}"
    if "mops" in event and event["mops"] is not None:
        if not isinstance(event["mops"], list):
            return "\"mops\" must be a list"
        for number, mop in enumerate(event["mops"]):
            if not isinstance(mop, dict):
                return f"mop {number} is not a JSON object"
            for name in ("key", "value", "offset", "poll"):
                if mop.get(name) is not None and (not isinstance(mop[name], int) or isinstance(mop[name], bool)):
                    return f"mop {number}: \"{name}\" must be an integer, got {json.dumps(mop[name])[:40]}"
    for name in ("keys",):
        if event.get(name) is not None and not (isinstance(event[name], list) and all(isinstance(k, int) for k in event[name])):
            return f"\"{name}\" must be a list of integer keys"
    if event.get("rebalance") is not None and not isinstance(event["rebalance"], list):
        return "\"rebalance\" must be a list of {\"type\", \"keys\"}"
    return "a field has the wrong type for a history event"


def _ops(paired: DataFrame) -> DataFrame:
    """One row per op: completions with their invoke, plus invokes cut short (as info)."""
    is_invoke = F.col("type") == "invoke"
    cut = is_invoke & F.col("next_type").isNull()
    return (paired.where(~is_invoke | cut)
            .select(
                F.col("index").alias("op"),
                F.when(cut, F.col("index")).otherwise(F.col("prev_index")).alias("invoke_index"),
                "process", "f",
                F.when(cut, F.lit("info")).otherwise(F.col("type")).alias("type"),
                F.when(cut, F.col("time")).otherwise(F.col("prev_time")).alias("invoke_time"),
                F.when(cut, F.lit(None).cast("long")).otherwise(F.col("time")).alias("complete_time"),
                "error",
                F.coalesce("txn_id", "prev_txn_id").alias("txn_id"),
                "producer_id", "epoch", "commit_time",
                F.coalesce("group", "prev_group").alias("group"),
                F.coalesce("auto", F.lit(False)).alias("auto"),
                F.coalesce("keys", "prev_keys").alias("keys"),
                "rebalance",
                F.when(F.col("process") == "nemesis", F.col("value")).alias("value_json"),
                cut.alias("cut_short"),
                "mops",
            ))


def _mops(ops: DataFrame, paired: DataFrame) -> DataFrame:
    """One row per mop of an op's completion (its invoke's if cut short).

    Poll mops without a key (the `{"f": "poll"}` placeholder of an invoke)
    name no record and are left out.
    """
    exploded = ops.select(
        "op", "invoke_index", "process", "f", "type", "invoke_time", "complete_time", "txn_id",
        "epoch", "producer_id", "commit_time", "group",
        F.posexplode("mops").alias("mop_index", "m"))
    return (exploded
            .where(~((F.col("m.f") == "poll") & F.col("m.key").isNull()))
            .select(
                "op", F.col("mop_index").cast("int").alias("mop_index"),
                F.col("m.f").alias("mf"), F.col("m.key").alias("key"), F.col("m.value").alias("value"),
                F.col("m.offset").alias("offset"), F.col("m.poll").alias("poll"),
                F.col("m.from")[0].alias("from_key"), F.col("m.from")[1].alias("from_value"),
                "process", "f", "type", "invoke_index", "invoke_time", "complete_time", "txn_id",
                "epoch", "producer_id", "commit_time", "group"))
