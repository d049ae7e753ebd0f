"""A fast start for the driver JVM, which dominates the check of a small run.

Two things cut a cold `gregor check` of a few thousand events roughly in half
(benchmarks/bench_checkers.py --small):

- A class-data-sharing archive of the classes a check loads (Spark, Scala,
  Catalyst): made once per Java and pyspark installation by `./setup`
  (`python -m checkers.jvm_start`), then mapped by every driver JVM instead of
  loading and verifying thousands of classes one by one. A missing or stale
  archive only costs the time it would have saved; the JVM never fails for it.
- The quick JIT compiler only (C1) for small histories in local mode: a short
  check ends before the optimising compiler would pay for itself, while a
  large one needs it (SMALL_HISTORY_BYTES).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ground.paths import cache_dir

# Up to about 180,000 events: below this the quick compiler wins, above it the
# optimising one does (measured in docs/CHECKERS.md, "A fast start").
SMALL_HISTORY_BYTES = 24 * 2**20

# The quick compiler alone shrinks the JIT's code cache to 48 MiB by default,
# and a session that checks again and again fills it (each check compiles new
# generated classes): a session for a 100k-event history stalled flushing it
# after 8 checks (4.1 s, then 5.4 s) and once switched the compiler off for
# good ("CodeCache is full. Compiler has been disabled"). The tiered default
# of 240 MiB is address space, not memory: only the code compiled is
# committed (52 MiB after 20 such checks, each 3.7 to 4.0 s).
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

# The archive's own warnings (classes it cannot hold, a stale file) are noise
# on a user's terminal: a check works the same with or without it.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_binary() -> str:
    """The java Spark starts: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


@functools.cache
def _java_version() -> str:
    """The version of the java Spark starts."""
    try:
        done = subprocess.run(
            [java_binary(), "-XshowSettings:properties", "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = [
        line.split("=", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.strip().startswith(("java.vm.version", "java.home"))
    ]
    return " ".join(found) or "unknown"


def archive_path() -> Path:
    """The archive for this Java and this pyspark installation.

    The JVM maps an archive only while every jar keeps the size and the
    modification time (in seconds) it had when the archive was made, and
    otherwise silently loads from the jars. So both are in the name: a
    reinstalled pyspark at the same path and version gets a new archive.
    """
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    stats = [(p.name, p.stat()) for p in jars.glob("*.jar")] if jars.is_dir() else []
    listing = sorted((name, st.st_size, int(st.st_mtime)) for name, st in stats)
    digest = hashlib.sha256(
        json.dumps([_java_version(), pyspark.__version__, str(jars), listing]).encode()
    ).hexdigest()[:16]
    return cache_dir() / "spark-cds" / f"driver-{digest}.jsa"


def java_options(master: str, history_bytes: int | None) -> str:
    """Driver JVM options for a session that will check a history of this size
    (None: unknown, e.g. a long-lived session)."""
    options = []
    archive = archive_path()
    if archive.is_file():
        options += [f"-XX:SharedArchiveFile={archive}", QUIET]
    if master.startswith("local") and history_bytes is not None and history_bytes <= SMALL_HISTORY_BYTES:
        options.append(QUICK_JIT)
    return " ".join(options)


def _warmup_run(directory: Path) -> Path:
    """A small transactional run (sends, polls, a txn with a copier's commit):
    enough to load the classes of every finder."""
    directory.mkdir(parents=True, exist_ok=True)
    events = []

    def op(process, f, invoke_mops, done_mops, **extra):
        base = {"process": process, "f": f, **extra}
        events.append({**base, "type": "invoke", "mops": invoke_mops})
        events.append({**base, "type": "ok", "mops": done_mops})

    for n in range(40):
        key, value = n % 4, n // 4
        send = {"f": "send", "key": key, "value": value}
        op(
            n % 3,
            "txn",
            [send, {"f": "send", "key": 4, "value": n}],
            [{**send, "offset": value}, {"f": "send", "key": 4, "value": n, "offset": n}],
            txn_id=f"t{n % 3}",
            producer_id=n % 3,
            epoch=0,
            commit_time=0,
        )
        op(3, "poll", [{"f": "poll"}], [{"f": "poll", "key": key, "offset": value, "value": value}])
    op(
        4,
        "txn",
        [{"f": "poll"}],
        [
            {"f": "poll", "key": 4, "offset": 0, "value": 0},
            {"f": "send", "key": 5, "value": 0, "from": [4, 0], "offset": 0},
            {"f": "commit", "key": 4, "offset": 1},
        ],
        group="copiers",
        txn_id="c0",
        producer_id=9,
        epoch=0,
        commit_time=0,
    )
    with open(directory / "history.jsonl", "w") as out:
        for index, event in enumerate(events):
            out.write(json.dumps({**event, "index": index, "time": 1000 * index}) + "\n")
    test = {
        "name": "jvm-warmup",
        "workload": "txn",
        "keys": {str(k): ["warmup", k] for k in range(6)},
        "client": {
            "acks": "all",
            "enable.idempotence": True,
            "isolation.level": "read_committed",
            "transactional": True,
            "transaction.timeout.ms": 10000,
        },
        "drain": {"complete": True},
    }
    (directory / "test.json").write_text(json.dumps(test))
    return directory


def build_archive(progress=print) -> Path:
    """Checks a small run in a JVM that writes the archive as it exits, then
    moves it into place (so a half-written archive is never used)."""
    from pyspark import SparkContext

    from checkers.check import check_dir
    from checkers.spark import get_spark

    final = archive_path()
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_suffix(f".{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="gregor-jvm-warmup-") as scratch:
        spark = get_spark(
            "local[2]",
            {"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"},
            fast_start=False,
        )
        check_dir(_warmup_run(Path(scratch) / "run"), spark, progress=lambda _line: None)
        spark.stop()
        proc = SparkContext._gateway.proc
        proc.stdin.close()  # the JVM exits on the end of its input, writing the archive
        proc.wait(timeout=300)
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class-data archive at {partial}")
    os.replace(partial, final)
    for stale in final.parent.glob("driver-*.jsa"):
        if stale != final:
            stale.unlink()
    progress(f"Spark driver class-data archive: {final} ({final.stat().st_size / 2**20:.0f} MiB)")
    return final


def main() -> int:
    """For ./setup: makes the archive once. A failure is a warning, not a
    failed setup: checks work without the archive, only slower to start."""
    archive = archive_path()
    if archive.is_file():
        print(f"Spark driver class-data archive: {archive} (already made)")
        return 0
    try:
        build_archive()
    except Exception as error:  # noqa: BLE001 - any failure only costs start time
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"warning: no Spark driver class-data archive ({first}); checks will start slower")
    return 0


if __name__ == "__main__":
    sys.exit(main())
