"""Runs the per-key pass (checkers/keypass.py) on Spark, over the loaded table.

The table is already partitioned by route, so a key's rows are in one
partition: `mapInArrow` hands each partition's key rows to the pass as
Arrow batches of numeric columns, and the pass's output rows come back the
same way. No shuffle, one Python round trip per partition. The main pass's
rows come sorted by key (a sort within each partition), and a task runs the
pass a few whole keys at a time as their rows come in: it holds those keys'
rows, not all of its partition's (`streamed_key_chunks`).

`main(t)` is the pass every check runs (stored: several finders read its
output); before it, a few jobs answer the questions the pass needs from
other keys or other ops (which `info` transactions had a send read, which
transactions a newer instance fenced, which groups copy).
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import allowed, fencing, pieces
from checkers.anomaly import ANOMALY_SCHEMA
from checkers.arrays import NULL
from checkers.buckets import lag_bucket_seconds
from checkers.examples import merge_summaries, partition_summary
from checkers.fetch import table_rows
from checkers.keypass import (
    ANOMALY,
    COVER,
    EOS_COUNT,
    EXAMPLE,
    INFO_NODE,
    INPUT_COLUMNS,
    LAG,
    LATE,
    NAMED,
    NODE,
    ROUTE,
    SPAN,
    TALLY,
    TORN,
    ZOMBIE_SEND,
    KeyPass,
    Params,
)
from checkers.load import Tables, free_rows, known_keys, stored_rows
from checkers.packed_order import packed_order
from checkers.reads import read_by_ok
from checkers.routes import rows_in_partitions, rows_of_routes
from checkers.table_format import (
    COMMIT_ROW,
    INFO_CODE,
    KEY_KINDS,
    NEMESIS_ROUTE,
    OK_CODE,
    OP_ROW,
    SEND_ROW,
)

# The pass's rows: a tag, an anomaly's fields (all but the cycle text), and
# four numbers whose meaning depends on the tag.
OUTPUT_SCHEMA = T.StructType(
    [T.StructField("tag", T.IntegerType())]
    + [f for f in ANOMALY_SCHEMA.fields if f.name != "cycle"]
    + [T.StructField(name, T.LongType()) for name in ("a", "b", "c", "d")]
)
_ARROW_SCHEMA = pa.schema(
    [
        ("tag", pa.int32()),
        ("name", pa.string()),
        ("key", pa.int64()),
        ("value", pa.int64()),
        ("values", pa.list_(pa.int64())),
        ("offset", pa.int64()),
        ("offsets", pa.list_(pa.int64())),
        ("ops", pa.list_(pa.int64())),
        ("time", pa.int64()),
        ("a", pa.int64()),
        ("b", pa.int64()),
        ("c", pa.int64()),
        ("d", pa.int64()),
    ]
)
LIST_COLUMNS = ("values", "offsets", "ops")


def _input_expressions() -> list[str]:
    """The pass's input columns as SQL text: one selectExpr call, where the
    same columns built with F.* took about 700 JVM round trips per pass."""

    def filled(name, alias=None):
        return f"coalesce(cast(`{name}` as bigint), {NULL}L) as `{alias or name}`"

    # The flags (kind, is_txn, tcode, reads) are only ever compared: one byte
    # each, where eight took 28 of the 152 bytes a row the pass holds
    # throughout (issue 42: a long-transaction key of 7.8M rows).
    return [
        "key",
        "cast(kind as tinyint) as kind",
        filled("op"),
        filled("mop_index"),
        filled("pid"),
        "cast(is_txn as tinyint) as is_txn",
        "cast(tcode as tinyint) as tcode",
        filled("value"),
        filled("offset"),
        filled("from_key"),
        filled("from_value"),
        filled("invoke_time"),
        filled("complete_time"),
        filled("commit_time"),
        filled("gid", "group"),
        filled("seg"),
        filled("n_sends"),
        filled("n_send_keys"),
        "coalesce(cast(reads as tinyint), 0Y) as reads",
    ]


INPUT_EXPRESSIONS = _input_expressions()


def key_pass(t: Tables, params: Params, keys: list[int] | None = None) -> DataFrame:
    """The pass's output rows (OUTPUT_SCHEMA) over every key, or only `keys`.
    The rows of the main and cycle modes come to each task sorted by key,
    which runs the pass on a few whole keys at a time as their rows arrive."""
    rows = t.rows if keys is None else rows_of_routes(t.rows, keys)  # a key row's route is its key
    rows = rows.where(F.col("kind").isin(*KEY_KINDS))
    if keys is not None:
        rows = rows.where(F.col("key").isin(list(keys)))
    rows = rows.selectExpr(*INPUT_EXPRESSIONS)
    if params.mode not in PER_KEY_MODES:
        return rows.mapInArrow(_runner(params), OUTPUT_SCHEMA)
    # In process order within a key: a large key's order steps run on stretches of it (checkers/pieces.py).
    rows = rows.sortWithinPartitions(*packed_order(t.metrics, KEY_ORDER))
    return rows.mapInArrow(_runner(params, KEY_CHUNK_ROWS, pieces.sizes()), OUTPUT_SCHEMA)


# The per-key modes' row order: in process order within a key.
KEY_ORDER = ("key", "pid", "op", "mop_index")

# A task of the main or cycle pass runs it on at most this many rows at once: whole
# keys, and a key with more rows alone. The pass's arrays took about 200
# bytes a row on top of its input's 152 (150 over 124 since its spans are
# made part by part and its flags are bytes): a task of 10M-event eos that
# held two keys of about 900,000 rows each held both keys' input and arrays
# at once (issue 42: 1 GB per Python worker, against 0.45 GB one key at a time).
KEY_CHUNK_ROWS = 1 << 19
# Modes a task may run a few keys at a time. The cycle mode's NODE and
# ROUTE rows are distinct per task, not per key, so its runner keeps each
# once across the chunks (_unseen): one key of 7.8M rows, run whole with the
# task's others, held the 10M long-transaction workers' peak (issue 42).
# The pictures' keys were read whole too: once the other two ran large keys
# in pieces, they held the peak (workers 3.0 GB at 10M long transactions).
PER_KEY_MODES = ("main", "cycles", "picture")
# The rows the cycle mode makes per task, not per key, and the columns that name one.
TASK_DISTINCT = {NODE: ("a", "d"), ROUTE: ("a",)}


def _runner(params: Params, most: int | None = None, sizes: pieces.Sizes | None = None):
    """The task's function: its rows' pass, `most` rows at a time (all at
    once when None), a key larger than `sizes.large` in pieces."""

    def run(batches):
        # A worker's Arrow memory pool (mimalloc) keeps what its earlier tasks
        # freed: the load's parse left about 300 MiB in each worker (issue 42).
        pa.default_memory_pool().release_unused()
        found = []  # the anomaly parts, for the partition's examples
        seen = {tag: np.empty(0, dtype=np.int64) for tag in TASK_DISTINCT} if most else None
        large, buckets = (sizes.large, sizes.buckets) if sizes else (None, pieces.BUCKETS)
        for chunk in streamed_key_chunks(batches, most, large, buckets) if most else _whole(batches):
            if isinstance(chunk, pieces.Spill):
                parts = _large_key_parts(chunk, params, sizes.stretch)
            else:
                parts = KeyPass(chunk, params).run().parts
            del chunk  # else it lives on while the next key's rows come in
            if seen is not None:
                parts = [kept for part in parts if (kept := _unseen(seen, part)) is not None]
            if params.examples:
                found += [part for part in parts if part["tag"][0] == ANOMALY]
            for part in parts:
                yield _batch(part)
            del parts
        if params.examples:
            for part in partition_summary(found, params.examples, (EXAMPLE, TALLY, NAMED)):
                yield _batch(part)

    return run


def _large_key_parts(spill: pieces.Spill, params: Params, stretch: int):
    """A large key's parts, its files removed once they are made (or the task fails)."""
    try:
        yield from pieces.large_key_parts(spill, params, stretch)
    finally:
        spill.remove()


def _unseen(seen: dict[int, np.ndarray], part: dict) -> dict | None:
    """The part without the task-distinct rows (TASK_DISTINCT) an earlier
    chunk of the task already gave, and `seen` grown by its new ones; any
    other part as it is. None when nothing of it is new."""
    tag = int(part["tag"][0])
    names = TASK_DISTINCT.get(tag)
    if names is None:
        return part
    # NODE's d is an interval set (0..3) and its a a node id (op << 20 | sub), so a * 4 + d names one.
    code = part[names[0]] * 4 + part["d"] if len(names) == 2 else part[names[0]]
    new = ~np.isin(code, seen[tag])
    if not new.any():
        return None
    seen[tag] = np.union1d(seen[tag], code[new])
    if new.all():
        return part
    kept = {name: (value[new] if isinstance(value, np.ndarray) else value) for name, value in part.items()}
    kept["n"] = int(new.sum())
    return kept


def _whole(batches):
    columns = input_columns(batches)
    if columns is not None:
        yield columns


def _copied(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """A batch's input columns as numpy arrays of their own (the batch can go)."""
    return {name: np.array(batch.column(name).to_numpy(zero_copy_only=False), copy=True) for name in INPUT_COLUMNS}


def input_columns(batches) -> dict[str, np.ndarray] | None:
    """The pass's input columns, copied out of each Arrow batch as it comes
    (None when there are no rows). Collecting the batches first, then
    converting, held every row twice: as Arrow and as numpy."""
    parts = [_copied(batch) for batch in batches if batch.num_rows]
    return pieces.joined(parts) if parts else None


def streamed_key_chunks(batches, most: int, large: int | None = None, buckets: int = pieces.BUCKETS):
    """`key_chunks` of a task's rows sorted by key, handed on as they come:
    a chunk goes once its keys' rows are all in and a next key's rows would
    make more than `most`, so a task holds one chunk and the rows of the key
    that follows it, not all of its keys'. A key with more than `large`
    rows goes to local files as its rows come, and comes out as a
    `pieces.Spill` once they are all in (run in pieces: checkers/pieces.py)."""
    done, done_rows = [], 0  # pieces of keys whose rows are all in
    current, current_rows, last = [], 0, None  # pieces of the last key seen
    spill = None  # the last key's files, once it is large
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            piece = _copied(batch)
            del batch
            key = piece["key"]
            if np.any(key[1:] < key[:-1]) or (last is not None and key[0] < last):
                raise RuntimeError("the per-key pass's rows came unsorted by key (passes.key_pass sorts them)")
            bounds = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(key)]
            for low, high in zip(bounds[:-1], bounds[1:]):
                segment = {name: values[low:high] for name, values in piece.items()}
                if key[low] != last:
                    if spill is not None:
                        large_key, spill = spill, None
                        yield large_key
                    done += current
                    done_rows += current_rows
                    current, current_rows, last = [], 0, key[low]
                if spill is not None:
                    spill.add(segment)
                    continue
                current.append(segment)
                current_rows += high - low
                if large is not None and current_rows > large:
                    if done:
                        yield from key_chunks(pieces.joined(done), most)
                        done_rows = 0
                    spill = pieces.Spill(buckets)
                    for earlier in current:
                        spill.add(earlier)
                    current, current_rows = [], 0
            if done_rows and done_rows + current_rows > most:
                yield from key_chunks(pieces.joined(done), most)
                done_rows = 0
        if spill is not None:
            large_key, spill = spill, None
            yield large_key
        done += current
        if done:
            yield from key_chunks(pieces.joined(done), most)
    finally:
        if spill is not None:  # the task failed or stopped while the key came in
            spill.remove()


def key_chunks(columns: dict[str, np.ndarray], most: int):
    """The rows of whole keys, at most `most` rows at a time (a larger key
    alone), as views of `columns`, whose rows come sorted by key (as
    `streamed_key_chunks` gathers them). Rows that fit at once come back as they are."""
    n = len(columns["key"])
    if n <= most:
        yield columns
        return
    key = columns["key"]
    bounds = np.r_[np.flatnonzero(np.r_[True, key[1:] != key[:-1]]), n]
    low = 0
    for i in range(1, len(bounds)):
        if i == len(bounds) - 1 or bounds[i + 1] - low > most:
            yield {name: columns[name][low : bounds[i]] for name in INPUT_COLUMNS}
            low = bounds[i]


def _nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=values == NULL)


def _batch(part: dict) -> pa.RecordBatch:
    n = part["n"]
    arrays = {"tag": pa.array(part["tag"], type=pa.int32()), "name": pa.array([part["name"]] * n, type=pa.string())}
    for column in ("key", "value", "offset", "time", "a", "b", "c", "d"):
        arrays[column] = _nullable(part[column])
    for column in LIST_COLUMNS:
        if column in part["lists"]:
            offsets, flat = part["lists"][column]
            arrays[column] = pa.ListArray.from_arrays(
                pa.array(offsets, type=pa.int32()), pa.array(flat, type=pa.int64())
            )
        else:
            arrays[column] = pa.nulls(n, type=pa.list_(pa.int64()))
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in _ARROW_SCHEMA], schema=_ARROW_SCHEMA)


# ------------------------------------------------------------ the Python workers

_PRESTARTED: set[str] = set()
_PRESTART_LOCK = threading.Lock()


def prestart_python_workers(spark) -> threading.Thread | None:
    """Starts the session's Python workers in the background, once per session.

    The first Python job of a session waits seconds for Spark to start its
    Python daemon and workers. The load runs no Python, so a check that
    starts them while the load runs has them ready for the per-key pass.
    Returns the thread that starts them, or None when this session's were
    started before.
    """
    context = spark.sparkContext
    with _PRESTART_LOCK:
        if context.applicationId in _PRESTARTED:
            return None
        _PRESTARTED.add(context.applicationId)
    slots = max(1, context.defaultParallelism)

    def start():
        try:
            spark.range(0, slots, numPartitions=slots).mapInArrow(_import_pass, "id long").collect()
        except Exception:  # a session stopped meanwhile: the pass itself will say what is wrong
            pass

    thread = threading.Thread(target=start, name="gregor-prestart-python-workers", daemon=True)
    thread.start()
    return thread


def _import_pass(batches):
    """Runs in a Python worker, which imports this module (and so the per-key
    pass) to run it, and keeps it for later tasks."""
    yield from batches


# ------------------------------------------------------------ the main pass


def main(t: Tables) -> DataFrame:
    """The main pass's output, stored by its first job (kept per run in t.cache)."""
    if "main" not in t.cache:
        t.cache["main"] = stored_rows(key_pass(t, main_params(t)), t.storage)
    return t.cache["main"]


def main_params(t: Tables) -> Params:
    if "params" not in t.cache:
        prior = cross_key_facts(t)
        t.cache["prior"] = prior
        t.cache["params"] = Params(
            mode="main",
            read_txns=np.array(sorted(prior["read_txns"]), dtype=np.int64),
            fenced=np.array(sorted({z["op"] for z in prior["fenced"]}), dtype=np.int64),
            copier_groups=np.array(sorted(prior["copier_groups"]), dtype=np.int64),
            read_uncommitted=allowed.reads_uncommitted(t.test),
            drain_complete=allowed.drain_complete(t.test),
            timeout=stuck_lso_timeout(t.test),
            lag_bucket=lag_bucket_ns(t),
            cover=cover_bins(t),
        )
    return t.cache["params"]


# The keys' cover bitmaps (KeyPass.cover): bins per event of a key, so that
# a key's ops rarely share a bin with a span they do not reach (at 1M events
# and 64 keys, 2**18 bins of about 3 ms); at most COVER_BITS bits over all
# keys (16 MiB), and at most COVER_MAX_BINS per key (4 MiB of a task's memory).
COVER_BINS_PER_EVENT = 32
COVER_BITS = 1 << 27
COVER_MAX_BINS = 1 << 22


def cover_bins(t: Tables) -> tuple[int, int, int] | None:
    """(origin, width, bins) of the keys' cover bitmaps: the run's doubled
    times from its first to its last, cut into equal bins (None: no ops)."""
    m = t.metrics
    if m.get("first_time") is None or m.get("last_time") is None:
        return None
    n_keys = max(1, len(known_keys(t.test)))
    wanted = min(COVER_BITS // n_keys, COVER_BINS_PER_EVENT * m["events"] // n_keys, COVER_MAX_BINS)
    bins = 64 if wanted < 64 else 1 << (wanted.bit_length() - 1)
    origin, end = 2 * m["first_time"] - 1, 2 * m["last_time"] + 1
    return origin, max(1, -(-(end - origin + 1) // bins)), bins


def stuck_lso_timeout(test: dict) -> int | None:
    """transaction.timeout.ms in ns when the run reads committed (else stuck-lso is not checked)."""
    client = test.get("client") or {}
    timeout_ms = client.get("transaction.timeout.ms")
    if client.get("isolation.level") != "read_committed" or not isinstance(timeout_ms, (int, float)):
        return None
    return int(timeout_ms * 1_000_000)


def lag_bucket_ns(t: Tables) -> int:
    return int(round(lag_bucket_seconds(duration_s(t), len(t.test["keys"])) * 1e9))


def duration_s(t: Tables) -> float:
    m = t.metrics
    if not m.get("events"):
        return 0.0
    return max(0.0, (m["last_time"] - min(0, m["first_time"])) / 1e9)


def cross_key_facts(t: Tables) -> dict:
    """What the pass of one key needs to know from other keys and ops
    (nothing is read when the load saw nothing it could be about):
    - read_txns: `info` transactions of which some send was read by an `ok`
      op (all their sends must have happened);
    - fenced: transactions a newer instance of their transactional.id had
      initialised before they committed (zombie-write candidates,
      checkers/fencing.py);
    - copier_groups: groups whose ops derive outputs (sends with `from`)
      and that commit offsets in `ok` ops, inside their transactions or as
      `commit` ops (consume-transform-produce).

    Each part reads the loaded table itself, where it is (issue 42): a
    narrow table stored for them all, nearly all of it the `ok` polls the
    first part reads, took longer to store than the parts took to read the
    loaded table again (docs/CHECKERS.md)."""
    m, kind = t.metrics, F.col("kind")
    facts = {"read_txns": set(), "fenced": [], "copier_groups": set(), "copier_names": set()}
    if m["info_txn_sends"]:
        info_send = (kind == SEND_ROW) & (F.col("tcode") == INFO_CODE) & F.col("is_txn")
        read = read_by_ok(t.rows, info_send, metrics=m).select("op").distinct().toArrow()
        facts["read_txns"] = set(read.column("op").to_pylist())
    if m["ok_inits"]:
        # Only the partitions that hold client op rows are read (the load found them).
        ops = rows_in_partitions(t.rows, m["op_partitions"]).where(kind == OP_ROW)
        facts["fenced"] = fencing.fenced(ops, m["ok_inits"])
    if m["derived_sends"] and m["ok_commits"]:
        facts["copier_groups"], facts["copier_names"] = _copiers(t.rows)
    return facts


def _copiers(rows: DataFrame) -> tuple[set, set]:
    """The copier groups' ids (the hash key rows carry) and names (on their op rows)."""
    kind, gid = F.col("kind"), F.col("gid")
    ok_commit = (kind == COMMIT_ROW) & (F.col("tcode") == OK_CODE)
    deriving = (kind == SEND_ROW) & F.col("from_key").isNotNull()
    named = kind == OP_ROW
    groups = (
        rows.where(gid.isNotNull() & (ok_commit | deriving | named))
        .groupBy("gid")
        .agg(
            F.max(ok_commit.cast("int")).alias("commits"),
            F.max(deriving.cast("int")).alias("derives"),
            F.collect_set(F.when(named, F.col("group"))).alias("names"),
        )
        .where((F.col("commits") == 1) & (F.col("derives") == 1) & (F.size("names") > 0))
    )
    ids, names = set(), set()
    for row in groups.collect():
        ids.add(row["gid"])
        names.update(row["names"])
    return ids, names


def anomalies(frame: DataFrame, names=None) -> DataFrame:
    """The pass's anomaly rows as ANOMALY_SCHEMA (optionally only `names`)."""
    rows = frame.where(F.col("tag") == ANOMALY)
    if names is not None:
        rows = rows.where(F.col("name").isin(*names))
    return rows.select(
        *[
            F.col(f.name).cast(f.dataType) if f.name in frame.columns else F.lit(None).cast(f.dataType).alias(f.name)
            for f in ANOMALY_SCHEMA.fields
        ]
    )


# ------------------------------------------------------------ what comes back to the driver

# Output tags small enough to bring back whole (the rest stay in Spark).
SMALL_TAGS = (SPAN, TORN, ZOMBIE_SEND, INFO_NODE, LATE, LAG, COVER, EOS_COUNT)
NEMESIS_TAG = -1
NAMED_TAG = NAMED  # per key an anomaly names: the lowest offset named on it


def example_order() -> list[F.Column]:
    """Examples are the earliest anomalies: by time (nulls last), then key, value, offset, ..."""
    return [
        F.col("time").asc_nulls_last(),
        F.col("key"),
        F.col("value"),
        F.col("offset"),
        F.col("offsets"),
        F.col("values"),
        F.col("ops"),
    ]


def small(t: Tables) -> dict:
    """tag -> rows of the main pass's small tags (and NEMESIS_TAG -> nemesis ops)."""
    if "small" not in t.cache:
        collect(t, 0)
    return t.cache["small"]


def collect(t: Tables, max_examples: int) -> tuple[dict, dict]:
    """One job without a shuffle: the small tags, the nemesis ops, and per
    anomaly name of the main pass its count and its first `max_examples`
    examples (earliest first), merged from each partition's own
    (checkers/examples.py). Returns (counts, examples); the small rows go
    to t.cache["small"], NAMED_TAG's as one row per key named."""
    keep = max(max_examples, 1)
    params = main_params(t)
    if params.examples < keep:  # the stored pass kept fewer: run it again
        if "main" in t.cache:
            free_rows(t.cache.pop("main"))
        t.cache["params"] = replace(params, examples=keep)
    out = main(t)
    padding = [F.lit(None).cast(t_).alias(n) for n, t_ in NEMESIS_COLUMNS]
    mine = out.where(F.col("tag").isin(*SMALL_TAGS, EXAMPLE, TALLY, NAMED)).select("*", *padding)
    # The nemesis ops have a route of their own: read its partition, not the whole table.
    nemesis = (
        rows_of_routes(t.rows, [NEMESIS_ROUTE])
        .where(F.col("kind") == OP_ROW)
        .select(F.lit(NEMESIS_TAG).alias("tag"), F.col("op").alias("a"), *[F.col(n) for n, _ in NEMESIS_COLUMNS])
    )
    nemesis = nemesis.select(
        *[
            F.col(c) if c in nemesis.columns else F.lit(None).cast(OUTPUT_SCHEMA[c].dataType).alias(c)
            for c in OUTPUT_SCHEMA.names
        ],
        *[F.col(n) for n, _ in NEMESIS_COLUMNS],
    )
    table = mine.unionByName(nemesis).toArrow()
    is_cover = pc.equal(table.column("tag"), COVER)
    rows = table_rows(table.filter(pc.invert(is_cover))) + table_rows(table.filter(is_cover), ("values",))
    found: dict = {}
    for row in rows:
        found.setdefault(row["tag"], []).append(row)
    counts, examples, named = merge_summaries(found.pop(TALLY, []), found.pop(EXAMPLE, []), found.pop(NAMED, []), keep)
    found[NAMED_TAG] = [{"key": key, "offset": offset} for key, offset in sorted(named.items())]
    t.cache["small"] = found
    return counts, examples


NEMESIS_COLUMNS = (
    ("f", "string"),
    ("type", "string"),
    ("invoke_time", "long"),
    ("complete_time", "long"),
    ("value_json", "string"),
)


def nemesis_ops(t: Tables) -> list[dict]:
    """The run's nemesis ops in history order (collected with the main pass's small rows)."""
    result = []
    for row in sorted(small(t).get(NEMESIS_TAG, []), key=lambda r: r["a"]):
        try:
            value = json.loads(row["value_json"]) if row["value_json"] else None
        except ValueError:
            value = row["value_json"]
        result.append(
            {
                "op": row["a"],
                "f": row["f"],
                "value": value,
                "time": row["complete_time"] if row["complete_time"] is not None else row["invoke_time"],
            }
        )
    return result
