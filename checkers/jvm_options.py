"""A fast start for the driver JVM, which dominates the check of a small run: its options.

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

This module only says which options a new driver JVM gets
(checkers/spark.py asks it); checkers/jvm_start.py makes the archive, by
running a check, so it stands above the whole checker.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
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


def jars_dir() -> Path:
    """The jars of the pyspark installation this process imports."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_path() -> Path:
    """The archive for this Java and this pyspark installation.

    The JVM maps an archive only while every jar keeps the size and the
    modification time (in seconds) it had when the archive was made, and
    otherwise silently loads from the jars. So both are in the name: a
    reinstalled pyspark at the same path and version gets a new archive.
    """
    import pyspark

    jars = jars_dir()
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
