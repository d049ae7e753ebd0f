"""The one place a Spark session is made, so every checker runs on the same tuning.

Defaults suit this project's small machines: two local cores, few shuffle
partitions (histories are millions of small rows, not terabytes), no web UI
and quiet logs. A cluster is one ``--spark-master`` away; any other Spark
setting passes through ``--spark-conf key=value``.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Mapping

from checkers.jvm_options import java_options
from ground.errors import GregorError

DEFAULT_MASTER = "local[2]"

# Which collector the driver runs, and how it sizes its heap within
# spark.driver.memory. Collection may take up to 1/5 of the time before the
# heap grows, and the old generation keeps at most 40% free after a
# collection: with G1 these ratios took the JVM's peak at 10M events from
# 1,478 MiB to 1,273. The parallel collector honours the same ratios, and
# its own structures take 47 MiB at a 1 GB heap where G1's take 77 (native
# memory tracking). With the smaller memory pool below, the JVM's peak on
# 1M long transactions went from 1,240 and 1,296 MiB (G1) to 1,075 and
# 1,123 (docs/CHECKERS.md).
HEAP_POLICY = ("-XX:+UseParallelGC", "-XX:GCTimeRatio=4", "-XX:MinHeapFreeRatio=10", "-XX:MaxHeapFreeRatio=40")

# Arrow's Java buffers check every read against their bounds and their
# reference count, and its vectors check a value's null bit again after
# Spark has checked it. While the load turned the parsed rows into Spark's
# (10M-event eos, JFR), 14% of the JVM's samples were the buffers' checks.
# The batches Spark reads are its own or whole ones from the Python workers.
ARROW_OPTIONS = ("-Darrow.enable_unsafe_memory_access=true", "-Darrow.enable_null_check_for_get=false")

DEFAULT_CONF = {
    "spark.app.name": "gregor-check",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Local mode: the driver is also the executor, so this heap holds the
    # data: a table in memory (histories up to 64 MiB, checkers/load.py) and
    # the buffers of the jobs. With 2 GB, G1 grew the heap towards 2 GB
    # however little the check held, so the longer the check the larger the
    # JVM (2,104 MiB at 1M events, 2,429 at 10M); 1 GB checked 1M and 10M
    # events as fast (paired timings 1.017 and 1.014) with the JVM at 1,238
    # and 1,683 MiB (docs/CHECKERS.md).
    "spark.driver.memory": "1g",
    # The share of the heap (less 300 MB) that Spark's jobs and stored
    # blocks may take: 0.4, not 0.6. The per-key pass sorts every mop row by
    # key, and a sort holds its pages up to this pool before it spills. With
    # 0.4 and the parallel collector, the JVM at 10M txn events peaked at 972
    # and 1,046 MiB against 1,183 and 1,241 with Spark's 0.6 and G1, and the
    # check took 111 and 115 s against 115 and 119 (docs/CHECKERS.md).
    "spark.memory.fraction": "0.4",
    # Spark's status store keeps 1,000 jobs (with their plans) by default,
    # which fills a long-lived session's heap (the test suite checks a
    # hundred runs in one session).
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "2000",
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.dagGraph.retainedRootRDDs": "50",
    "spark.sql.adaptive.enabled": "true",
    # No join is broadcast, or hashed whole in one task, on Spark's guess of
    # a table's size: the stored tables (local checkpoints) report a few
    # bytes whatever they hold, so every join on them was broadcast, and at
    # 10M events the distinct reads of every poll did not fit in the driver
    # ("Not enough memory to build and broadcast the table"). Joins sort and
    # spill instead; a checker broadcasts a table only when it has counted
    # its rows first and they fit (`may_broadcast`).
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # Each query stage of an adaptive plan runs on a thread of a pool that
    # starts a new thread for every stage until it holds this many, and lets
    # an idle one end only after 60 s: with Spark's 1,024, a session
    # checking small runs one after another held 837 JVM threads after 60
    # checks (173 after the first). A check has a few stages at a time.
    "spark.sql.resultQueryStage.maxThreadThreshold": "16",
    "spark.sql.shuffleExchange.maxThreadThreshold": "16",
    # A check compiles about 100 distinct generated classes; with Spark's
    # default cache of 100 each check of a long-lived session evicted the
    # last one's and compiled (and JIT-compiled) them all again.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # A compiled stage with a method over 8,000 bytes of bytecode is never
    # JIT-compiled by the JVM and runs interpreted: the load's row projection
    # made one of 10.5 kB. Spark then runs that stage operator by operator
    # (each compiled on its own), which cost a quarter less CPU there.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Mid-size histories (tens of MB) are parsed by both cores, not one.
    "spark.sql.files.maxPartitionBytes": "32m",
    "spark.sql.session.timeZone": "UTC",
    # A large history's table is stored on disk (checkers/load.py), and what
    # Spark writes there goes through this serializer: with Kryo instead of
    # Java's, `gregor check` took 0.940 of the time at 10M events and 0.954
    # at 1M (paired runs, docs/CHECKERS.md), with the same results.
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    # Null on overflow or a bad index, as the checkers expect, not a failed job.
    "spark.sql.ansi.enabled": "false",
    # The per-key pass runs in Python workers fed with Arrow batches: this
    # interpreter (it has numpy and pyarrow), in batches big enough that the
    # per-batch overhead does not count.
    "spark.pyspark.python": sys.executable,
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    # No byte bound besides: with one, Spark sizes the batch it is writing
    # after every row, a walk over all its vectors (14% of the JVM's samples
    # while it fed the per-key pass, 10M-event eos; with both changes that
    # stage's JVM time went from 14.9 s to 11.7). 100,000 rows of the pass's
    # 19 columns are about 12 MB.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    # Errors only on the terminal (checkers/log4j2.properties). The default
    # options, not the extra ones, so a user's spark.driver.extraJavaOptions
    # adds to this instead of replacing it.
    "spark.driver.defaultJavaOptions": f"-Dlog4j.configurationFile={Path(__file__).with_name('log4j2.properties')} "
    + " ".join(HEAP_POLICY + ARROW_OPTIONS),
    "spark.executor.defaultJavaOptions": " ".join(ARROW_OPTIONS),
}


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """--spark-master and --spark-conf, shared by every command that runs Spark."""
    parser.add_argument(
        "--spark-master", metavar="URL", default=None, help="Spark master (default $GREGOR_SPARK_MASTER or local[2])"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting, repeatable (e.g. spark.driver.memory=2g)",
    )


# What a JVM says when its heap (or Spark's share of it) ran out.
OUT_OF_MEMORY = (
    "OutOfMemoryError",
    "Java heap space",
    "GC overhead limit exceeded",
    "Not enough memory to build and broadcast",
    "Could not allocate memory",
    "Unable to acquire",
)
JVM_GONE = ("Py4JNetworkError", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError")


def out_of_memory(error: BaseException, heap: str, history_bytes: int) -> GregorError | None:
    """The one-line error for a check that ran out of memory, None for any
    other error: the setting to raise, its value (`heap`) and one that would do.
    A JVM that ended mid-check (its py4j link gone) most likely ran out too."""
    text = f"{type(error).__name__}: {error}"
    died = type(error).__name__ in JVM_GONE or "Answer from Java side is empty" in text
    if not died and not any(sign in text for sign in OUT_OF_MEMORY):
        return None
    wanted = max(2 * _gigabytes(heap), math.ceil(history_bytes / 2**30))
    what = "Spark's JVM ended during the check (most likely out of memory)" if died else "the check ran out of memory"
    return GregorError(
        f"{what} with spark.driver.memory={heap} for {history_bytes / 2**20:,.0f} MiB of history: "
        f"check it again with --spark-conf spark.driver.memory={wanted:g}g"
    )


def driver_memory(spark) -> str:
    """The session's spark.driver.memory, as set."""
    return spark.sparkContext.getConf().get("spark.driver.memory", "1g")


def _gigabytes(size: str) -> float:
    """A JVM memory size ("1g", "512m", "2048k") in GiB."""
    size = size.strip().lower()
    units = {"k": 2**-20, "m": 2**-10, "g": 1, "t": 2**10}
    if size and size[-1] in units:
        return float(size[:-1]) * units[size[-1]]
    return float(size) / 2**30


def parse_conf(pairs: Iterable[str] | None) -> dict[str, str]:
    """Turns ``["k=v", ...]`` from the command line into a dict, or says which one is wrong."""
    conf: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise GregorError(f"--spark-conf {pair!r} is not key=value (e.g. --spark-conf spark.driver.memory=2g)")
        conf[key.strip()] = value.strip()
    return conf


# A broadcast table is built whole in the driver's heap, first as rows, then
# as a hash table several times their size, while the check holds its own
# tables: one may take this share of the heap at most.
BROADCAST_HEAP_SHARE = 1 / 16
# What one row of a broadcast hash table of a few numbers costs in the driver.
BROADCAST_ROW_BYTES = 96


def driver_heap_bytes(spark) -> int:
    """The driver JVM's maximum heap."""
    return int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())


def may_broadcast(spark, rows: int, row_bytes: int = BROADCAST_ROW_BYTES) -> bool:
    """Whether a table of `rows` rows, counted before anything is built, may be broadcast."""
    return rows * row_bytes <= driver_heap_bytes(spark) * BROADCAST_HEAP_SHARE


def broadcast_if_small(frame, rows: int, row_bytes: int = BROADCAST_ROW_BYTES):
    """`frame` marked for broadcast when its `rows` (counted beforehand) fit, else as it is (a sort-merge join)."""
    from pyspark.sql import functions as F

    return F.broadcast(frame) if may_broadcast(frame.sparkSession, rows, row_bytes) else frame


def where_in(frame, column: str, values: list[int], in_list_max: int = 200):
    """`frame`'s rows whose bigint `column` is one of `values` (a list in the
    driver): an IN list for a few, else a semi join with them, broadcast when they fit."""
    from pyspark.sql import functions as F

    if len(values) <= in_list_max:
        return frame.where(F.col(column).isin(values))
    chosen = frame.sparkSession.createDataFrame([(v,) for v in values], f"{column} long")
    return frame.join(broadcast_if_small(chosen, len(values)), column, "left_semi")


@contextmanager
def session_conf(spark, key: str, value: str):
    """`key` set to `value` in the session while the block runs, then put back."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


# glibc's M_MMAP_THRESHOLD (malloc.h) and the size Gregor fixes it at.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 4 * 2**20


def fix_mmap_threshold() -> None:
    """Blocks of 4 MiB and more mapped and unmapped, in this process and the
    JVM and Python workers it starts (unless the user set MALLOC_MMAP_THRESHOLD_).

    By default glibc serves a freed block's size from its heap from then on
    (its mmap threshold climbs to 32 MB), and a heap gives back only its top:
    a per-key pass's Python worker kept a key's numpy arrays after the key
    (issue 42, docs/CHECKERS.md). Children read the variable when they start;
    this process, already started, is told directly.
    """
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD_BYTES))
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, int(os.environ["MALLOC_MMAP_THRESHOLD_"]))
    except (OSError, AttributeError, ValueError):
        pass  # not glibc, or a value glibc would not take either: memory, never correctness


def get_spark(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    history_bytes: int | None = None,
    fast_start: bool = True,
):
    """Returns a (possibly already running) SparkSession with Gregor's defaults.

    ``master`` falls back to $GREGOR_SPARK_MASTER, then local[2]. ``conf``
    overrides any default. A new driver JVM starts fast (checkers/jvm_start.py)
    unless ``fast_start`` is false; ``history_bytes``, the size of the one
    history this session is for, lets it pick the JIT that suits that size.
    """
    from pyspark.sql import SparkSession

    master = master or os.environ.get("GREGOR_SPARK_MASTER") or DEFAULT_MASTER
    if master.startswith("local"):
        # Avoids the loopback-hostname warning and any traffic off this host.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The driver JVM (and the Python workers it starts) inherit this: glibc
    # otherwise gives each busy thread its own 64 MB malloc arena, and the
    # JVM of a 10M-event check held five of them (about 290 MiB, of which
    # the JVM's own tracking accounts for some 70). With two, its peak was
    # 1,506 MiB against 1,699 (a 1 GB heap; docs/CHECKERS.md).
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    fix_mmap_threshold()
    # Python workers run this interpreter (it has numpy and pyarrow), unless
    # the user names another one (PYSPARK_PYTHON or spark.pyspark.python).
    os.environ.setdefault("PYSPARK_PYTHON", (conf or {}).get("spark.pyspark.python", sys.executable))
    settings = dict(DEFAULT_CONF)
    if fast_start:
        settings["spark.driver.defaultJavaOptions"] += " " + java_options(master, history_bytes)
    settings.update(conf or {})
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as error:  # Java missing, bad master URL, ...
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise GregorError(f"cannot start Spark (master {master}): {first}") from error
    spark.sparkContext.setLogLevel("ERROR")
    return spark
