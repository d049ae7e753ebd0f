"""Exports to Jepsen's and Elle's history forms, and the results' `elle` section.

Why: users trust Jepsen's checkers; exporting lets them run Jepsen's Kafka
checker or Elle on the very history Gregor judged, and, when an elle-cli jar
is configured, Gregor runs Elle itself and reports what it found next to the
native findings. Nothing depends on the jar: without one the section says so.

Both exports are written in real-time order: lines sorted by `time` (the
field that orders events in real time; history lines are in the order the
writer received them, so `time` can run backwards across processes by a few
milliseconds), ties by index. Elle infers real-time order from the order of
the lines, so an index order would show it precedences that never happened.
Each op row becomes its invoke and completion lines on the executors, the
lines are range-partitioned by (time, index), renumbered densely, written as
part files and concatenated in order. The driver only sees one count per
partition.

Jepsen Kafka form (jepsen.tests.kafka), one op map per line:
  {:type :invoke, :f :send, :value [[:send 3 17]], :process 1, :time T, :index I}
  {:type :ok, :f :send, :value [[:send 3 [41 17]]], ...}    ; [offset value], offset nil if unknown
  {:type :invoke, :f :poll, :value [[:poll]], ...}
  {:type :ok, :f :poll, :value [[:poll {3 [[41 17] [42 18]]}]], ...}
  :txn mixes both; :assign/:subscribe carry :value [keys]; :crash as is;
  nemesis ops are :process :nemesis, :type :info on both halves, as Jepsen
  logs them. Our `init` and `commit` ops and commit mops have no Jepsen
  counterpart and are left out (indices are renumbered densely).

Elle list-append form (for `elle-cli --model list-append`), one op map per
line, :f :txn:
  a send of value v to key k is [:append k v];
  the records an `ok` op polled from key k become ONE read [:r k L], placed
  where the op first read k, where L is the key's log (values in offset
  order, as every poll and known send saw it) up to the highest offset the op
  read: a Kafka consumer that reached offset o has seen the partition's
  prefix up to o. Reads of `fail`/`info` ops are [:r k nil] (they do not
  count as reads). A duplicate stays twice in L, so Elle sees it; where two
  values claim one offset (inconsistent offsets), L keeps the smallest.
  Caveat: L grows with the log, so this file is quadratic in the length of a
  key's log; `elle_section` refuses histories above ELLE_MAX_EVENTS.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checkers import edn, facts
from checkers.edn import Keyword
from checkers.load import load, ops_with_mops
from checkers.spark import add_spark_arguments, get_spark, parse_conf
from ground.errors import GregorError

ELLE_MAX_EVENTS = int(os.environ.get("GREGOR_ELLE_MAX_EVENTS", "200000"))
ELLE_TIMEOUT_S = int(os.environ.get("GREGOR_ELLE_TIMEOUT_S", "600"))
ELLE_ANOMALIES = "G0,G1a,G1c"
ELLE_MODELS = "read-uncommitted"
JEPSEN_FS = {"send", "poll", "txn", "assign", "subscribe", "crash"}
LIST_APPEND_FS = {"send", "poll", "txn"}
EXAMPLES = 3

_K = {
    name: Keyword(name)
    for name in (
        "type",
        "f",
        "value",
        "process",
        "time",
        "index",
        "error",
        "send",
        "poll",
        "append",
        "r",
        "txn",
        "nemesis",
        "info",
        "invoke",
    )
}

LINE_SCHEMA = T.StructType(
    [T.StructField("time", T.LongType()), T.StructField("index", T.LongType()), T.StructField("text", T.StringType())]
)


# ------------------------------------------------------------ per-op lines


def _process(value: str):
    return _K["nemesis"] if value == "nemesis" else int(value)


def _head(row, type_: str, time) -> dict:
    return {
        _K["type"]: Keyword(type_),
        _K["f"]: Keyword(row["f"]),
        _K["process"]: _process(row["process"]),
        _K["time"]: time,
    }


def _line(op_map: dict) -> str:
    """EDN of an op map without its :index (added when renumbered)."""
    return edn.dumps(op_map)


def _jepsen_value(mops, completed: bool) -> list:
    """Our mops as Jepsen's micro-ops: sends, and polls grouped per poll call."""
    value: list = []
    current = None  # (poll number, records map) of the poll group being filled
    for mop in mops or []:
        if mop["f"] == "send":
            current = None
            sent = [mop["offset"], mop["value"]] if completed else mop["value"]
            value.append([_K["send"], mop["key"], sent])
        elif mop["f"] == "poll":
            if not completed:
                if not (value and value[-1] == [_K["poll"]]):
                    value.append([_K["poll"]])
                continue
            if mop["key"] is None:  # a placeholder: a poll that read nothing
                value.append([_K["poll"], {}])
                current = None
                continue
            number = mop["poll"]
            if current is None or current[0] != number:
                records: dict = {}
                value.append([_K["poll"], records])
                current = (number, records)
            current[1].setdefault(mop["key"], []).append([mop["offset"], mop["value"]])
    return value


def jepsen_lines(row) -> list[tuple[int, int, str]]:
    """The Jepsen Kafka form of one op: its invoke and completion lines."""
    f = row["f"]
    if row["process"] == "nemesis":
        value = json.loads(row["value_json"]) if row["value_json"] else None
        done = _head(row, "info", row["complete_time"])
        if value is not None:
            done[_K["value"]] = value
        return _pair_lines(row, _head(row, "info", row["invoke_time"]), done)
    if f not in JEPSEN_FS:
        return []
    invoke = _head(row, "invoke", row["invoke_time"])
    done = _head(row, row["type"], row["complete_time"])
    if f in ("assign", "subscribe"):
        invoke[_K["value"]] = done[_K["value"]] = list(row["keys"] or [])
    elif f != "crash":
        mops = [m.asDict() for m in row["mops"] or [] if m["f"] in ("send", "poll")]
        invoke[_K["value"]] = _jepsen_value(mops, completed=False)
        done[_K["value"]] = _jepsen_value(mops, completed=True)
        if f == "poll" and not any(m[0] == _K["poll"] for m in done[_K["value"]]):
            done[_K["value"]].append([_K["poll"], {}])
            if not invoke[_K["value"]]:
                invoke[_K["value"]].append([_K["poll"]])
    if row["error"]:
        done[_K["error"]] = row["error"]
    return _pair_lines(row, invoke, done)


def _pair_lines(row, invoke: dict, done: dict) -> list[tuple[int, int, str]]:
    """(time, index, text) of an op's invoke and, unless cut short, its completion."""
    lines = [(row["invoke_time"], row["invoke_index"], _line(invoke))]
    if not row["cut_short"]:
        lines.append((row["complete_time"], row["op"], _line(done)))
    return lines


def list_append_lines(row) -> list[tuple[int, int, str]]:
    """The Elle list-append form of one op (see the module docstring)."""
    if row["process"] == "nemesis" or row["f"] not in LIST_APPEND_FS:
        return []
    prefixes = {r["key"]: list(r["prefix"]) for r in row["reads"] or []}
    ok = row["type"] == "ok" and not row["cut_short"]
    invoke_value, done_value, read_keys = [], [], set()
    for mop in row["mops"] or []:
        if mop["f"] == "send":
            micro = [_K["append"], mop["key"], mop["value"]]
            invoke_value.append(micro)
            done_value.append(micro)
        elif mop["f"] == "poll" and mop["key"] is not None and mop["key"] not in read_keys:
            read_keys.add(mop["key"])
            invoke_value.append([_K["r"], mop["key"], None])
            done_value.append([_K["r"], mop["key"], prefixes.get(mop["key"]) if ok else None])
    if not invoke_value:
        return []
    invoke = _head(row, "invoke", row["invoke_time"])
    invoke[_K["f"]] = _K["txn"]
    invoke[_K["value"]] = invoke_value
    done = _head(row, row["type"], row["complete_time"])
    done[_K["f"]] = _K["txn"]
    done[_K["value"]] = done_value
    return _pair_lines(row, invoke, done)


# ------------------------------------------------------------ writing


def _write_ordered(lines: DataFrame, path: Path, partitions: int) -> int:
    """Writes (time, index, text) lines sorted by time, then index, with dense :index values.

    Returns the number of lines. Only per-partition counts reach the driver.
    """
    ordered = lines.repartitionByRange(partitions, "time", "index").sortWithinPartitions("time", "index")
    ordered_rdd = ordered.rdd.map(lambda r: r["text"]).cache()
    counts = ordered_rdd.mapPartitionsWithIndex(lambda i, it: [(i, sum(1 for _ in it))]).collect()
    starts, total = {}, 0
    for i, n in sorted(counts):
        starts[i] = total
        total += n

    def renumber(i, texts):
        for n, text in enumerate(texts, start=starts[i]):
            yield text[:-1] + f", :index {n}}}"

    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=str(path.parent)))
    try:
        out_dir = tmp / "parts"
        ordered_rdd.mapPartitionsWithIndex(renumber).saveAsTextFile(str(out_dir))
        part_tmp = path.with_name(path.name + ".tmp")
        with open(part_tmp, "wb") as out:
            for part in sorted(glob.glob(str(out_dir / "part-*"))):
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out)
        os.replace(part_tmp, path)
    finally:
        ordered_rdd.unpersist()
        shutil.rmtree(tmp, ignore_errors=True)
    return total


def _partitions(spark) -> int:
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions", "4")))


def _tables(source, spark=None):
    """Tables as given, or loaded from a run directory."""
    if hasattr(source, "rows"):
        return source
    return load(Path(source), spark or get_spark())


def _spark_and_dir(source, spark=None):
    if hasattr(source, "rows"):
        return source.spark, source.directory
    return spark or get_spark(), Path(source)


def export_jepsen_edn(source, path, spark=None) -> int:
    """Writes the Jepsen Kafka EDN form of a run (Tables or directory); returns lines."""
    spark, directory = _spark_and_dir(source, spark)
    lines = ops_with_mops(spark, directory).rdd.flatMap(jepsen_lines)
    return _write_ordered(spark.createDataFrame(lines, LINE_SCHEMA), Path(path), _partitions(spark))


def _prefix_reads(t) -> DataFrame:
    """Per (ok op, key): the key's log up to the highest offset the op read."""
    log = facts.log(t)
    by_index = log.groupBy("key", "index").agg(F.min("value").alias("value"))
    logs = by_index.groupBy("key").agg(
        F.transform(F.sort_array(F.collect_list(F.struct("index", "value"))), lambda s: s["value"]).alias("values")
    )
    reads = (
        facts.ok_reads(t)
        .join(log.select("key", "offset", "index"), ["key", "offset"])
        .groupBy("op", "key")
        .agg(F.max("index").alias("top"))
    )
    return (
        reads.join(logs, "key")
        .select("op", F.struct("key", F.slice("values", 1, F.col("top") + 1).alias("prefix")).alias("read"))
        .groupBy("op")
        .agg(F.collect_list("read").alias("reads"))
    )


def export_list_append(source, path, spark=None) -> int:
    """Writes the Elle list-append form of a run (Tables or directory); returns lines."""
    t = _tables(source, spark)
    try:
        ops = (
            ops_with_mops(t.spark, t.directory)
            .where(F.col("f").isin(*LIST_APPEND_FS) & (F.col("process") != "nemesis"))
            .join(_prefix_reads(t), "op", "left")
        )
        lines = ops.rdd.flatMap(list_append_lines)
        return _write_ordered(t.spark.createDataFrame(lines, LINE_SCHEMA), Path(path), _partitions(t.spark))
    finally:
        if t is not source:
            t.release()


# ------------------------------------------------------------ running Elle


def elle_command(jar: str, history: str) -> list[str]:
    """elle-cli's command line: list-append model, JSON analysis on stdout."""
    return [
        "java",
        "-Xmx512m",
        "-jar",
        jar,
        "--model",
        "list-append",
        "--output",
        "json",
        "--anomalies",
        ELLE_ANOMALIES,
        "--consistency-models",
        ELLE_MODELS,
        history,
    ]


def parse_elle_output(stdout: str) -> dict:
    """Elle's JSON analysis -> {"valid", "anomalies": {name: {count, examples}}}.

    elle-cli may print log lines before the JSON; the analysis is the last
    top-level JSON object on stdout.
    """
    start = stdout.find("{")
    if start < 0:
        raise GregorError("Elle printed no JSON analysis; run it by hand to see why")
    decoder = json.JSONDecoder()
    analysis = None
    while start >= 0:
        try:
            analysis, _ = decoder.raw_decode(stdout, start)
            break
        except ValueError:
            start = stdout.find("{", start + 1)
    if not isinstance(analysis, dict):
        raise GregorError("Elle's output holds no JSON object; run it by hand to see why")
    anomalies = {}
    for name, instances in sorted((analysis.get("anomalies") or {}).items()):
        instances = instances if isinstance(instances, list) else [instances]
        anomalies[name] = {"count": len(instances), "examples": [_shorten(i) for i in instances[:EXAMPLES]]}
    valid = analysis.get("valid?")
    return {"valid": valid, "anomaly_types": analysis.get("anomaly-types", sorted(anomalies)), "anomalies": anomalies}


def _shorten(instance, limit: int = 2000):
    text = json.dumps(instance)
    return instance if len(text) <= limit else text[:limit] + "..."


def unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def elle_section(t, run_dir, elle_jar: str | None = None) -> dict:
    """results.json `elle`: what Elle found, or why it did not run."""
    jar = elle_jar or os.environ.get("GREGOR_ELLE_JAR")
    if not jar:
        return unavailable("no Elle jar configured (--elle-jar or GREGOR_ELLE_JAR)")
    if not os.path.isfile(jar):
        return unavailable(f"Elle jar {jar} does not exist")
    if shutil.which("java") is None:
        return unavailable("java is not on PATH, so the Elle jar cannot run")
    events = t.metrics["events"]
    if events > ELLE_MAX_EVENTS:
        return unavailable(
            f"history of {events} events is above the Elle export limit of "
            f"{ELLE_MAX_EVENTS} (GREGOR_ELLE_MAX_EVENTS): the list-append "
            "form grows with the square of a key's log"
        )
    history = Path(run_dir) / "elle-list-append.edn"
    export_list_append(t, history)
    command = elle_command(jar, str(history))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=ELLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return unavailable(f"Elle did not finish within {ELLE_TIMEOUT_S} s (GREGOR_ELLE_TIMEOUT_S)")
    # elle-cli exits 0 when valid, 1 when invalid, anything else on a crash.
    if done.returncode not in (0, 1):
        last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        return unavailable(f"Elle exited {done.returncode}: {last[0][:300]}")
    try:
        parsed = parse_elle_output(done.stdout)
    except GregorError as error:
        return unavailable(str(error))
    return {"available": True, "command": command, "history": str(history), **parsed}


# ------------------------------------------------------------ CLI

EXPORT_FORMATS = {"jepsen": ("history.edn", export_jepsen_edn), "elle": ("elle-list-append.edn", export_list_append)}


def register_export(subparsers) -> None:
    """Adds `gregor export DIR [--format jepsen|elle] [--out PATH]`; checkers/cli.py calls this."""
    parser = subparsers.add_parser(
        "export",
        help="write a run's history in Jepsen's Kafka EDN or Elle's list-append form",
        description="Jepsen form: run Jepsen's Kafka checker on it. Elle form: "
        "java -jar elle-cli.jar --model list-append FILE.",
    )
    parser.add_argument("dir", metavar="DIR", help="run directory holding history.jsonl and test.json")
    parser.add_argument("--format", choices=sorted(EXPORT_FORMATS), default="jepsen", help="jepsen (default) or elle")
    parser.add_argument(
        "--out", metavar="PATH", help="output file (default DIR/history.edn or DIR/elle-list-append.edn)"
    )
    add_spark_arguments(parser)
    parser.set_defaults(func=_run_export)


def _run_export(args) -> int:
    if not os.path.isdir(args.dir):
        raise GregorError(f"{args.dir}: no such run directory")
    default_name, export = EXPORT_FORMATS[args.format]
    out = Path(args.out or os.path.join(args.dir, default_name))
    if not out.parent.is_dir():
        raise GregorError(f"--out {out}: folder {out.parent} does not exist")
    spark = get_spark(args.spark_master, parse_conf(args.spark_conf))
    lines = export(args.dir, out, spark)
    print(f"wrote {lines} ops lines in {args.format} form to {out}")
    return 0
