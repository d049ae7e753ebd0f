"""Makes the driver JVM's class-data-sharing archive (checkers/jvm_options.py says why and uses it).

`./setup` runs `python -m checkers.jvm_start` once per Java and pyspark
installation: it checks a small run in a JVM that writes the archive of
every class a check loads as it exits. Running a check, it stands above
the whole checker.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from checkers.check import check_dir
from checkers.jvm_options import QUIET, archive_path, jars_dir
from checkers.spark import get_spark


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
    jars = jars_dir()
    note_of(final).write_text(json.dumps({"jars": str(jars)}))  # before the archive: never one without it
    os.replace(partial, final)
    prune_archives(final, jars)
    progress(f"Spark driver class-data archive: {final} ({final.stat().st_size / 2**20:.0f} MiB)")
    return final


def note_of(archive: Path) -> Path:
    """The note beside an archive that names the pyspark jars it was made for."""
    return archive.with_suffix(".json")


def prune_archives(kept: Path, jars: Path) -> list[Path]:
    """Removes the archives `kept` replaces: those made for the same jars
    (another Java, a reinstalled pyspark), those whose jars are gone, and
    those with no note of their jars beside them (made before the notes). Another pyspark
    installation's archive stays: two virtualenvs on one machine (a checkout
    and a worktree) would otherwise remove each other's on every setup, and
    every check of the other would start without one. Returns what it removed."""
    removed = []
    for archive in kept.parent.glob("driver-*.jsa"):
        if archive == kept:
            continue
        note = note_of(archive)
        try:
            made_for = Path(json.loads(note.read_text())["jars"])
        except (OSError, ValueError, KeyError, TypeError):
            made_for = None
        if made_for is None or made_for == jars or not made_for.is_dir():
            archive.unlink(missing_ok=True)
            note.unlink(missing_ok=True)
            removed.append(archive)
    return removed


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
