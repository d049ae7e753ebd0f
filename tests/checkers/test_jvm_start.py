"""The driver JVM's fast start (checkers/jvm_options.py, checkers/jvm_start.py):
which options a session gets, and that a real `gregor check` maps Spark's classes from the archive ./setup made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
from checker_histories import History, poll, send

from checkers import jvm_options, jvm_start


def test_only_a_local_session_for_one_small_history_runs_the_quick_jit_alone(monkeypatch, tmp_path):
    archive = tmp_path / "driver.jsa"
    monkeypatch.setattr(jvm_options, "archive_path", lambda: archive)
    quick = "-XX:TieredStopAtLevel=1"
    assert quick in jvm_options.java_options("local[2]", 4096)
    assert quick in jvm_options.java_options("local[2]", jvm_options.SMALL_HISTORY_BYTES)
    assert quick not in jvm_options.java_options("local[2]", jvm_options.SMALL_HISTORY_BYTES + 1)
    assert quick not in jvm_options.java_options("local[2]", None)  # a long-lived session: sizes unknown
    assert quick not in jvm_options.java_options("spark://m:7077", 4096)
    assert "SharedArchiveFile" not in jvm_options.java_options("local[2]", 4096)  # none made yet
    archive.write_bytes(b"x")
    assert f"-XX:SharedArchiveFile={archive}" in jvm_options.java_options("spark://m:7077", None)


def _code_cache_flags(options: list[str]) -> dict:
    """What a real JVM makes of these options: its final code cache size and JIT level."""
    flags = subprocess.run(
        [jvm_options.java_binary(), *options, "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    wanted = ("ReservedCodeCacheSize", "TieredStopAtLevel")
    return {
        words[1]: int(words[3])
        for words in map(str.split, flags.splitlines())
        if len(words) >= 4 and words[1] in wanted
    }


def test_the_quick_jit_keeps_the_tiered_code_cache():
    # The quick compiler alone reserves 48 MiB, which a session that checks
    # again and again fills; the options keep the tiered default.
    assert _code_cache_flags(["-XX:TieredStopAtLevel=1"])["ReservedCodeCacheSize"] == 48 * 2**20
    assert _code_cache_flags(jvm_options.QUICK_JIT.split()) == {
        "ReservedCodeCacheSize": 240 * 2**20,
        "TieredStopAtLevel": 1,
    }


def test_the_archive_names_this_java_and_this_pyspark():
    path = jvm_options.archive_path()
    assert path.parent.name == "spark-cds" and path.suffix == ".jsa"
    assert path == jvm_options.archive_path()  # stable between calls


def test_gregor_check_maps_sparks_classes_from_the_archive(tmp_path):
    # ./setup made it; a machine without one makes it here (about 40 s), in a
    # process of its own: this one may already hold a Spark session.
    if not jvm_options.archive_path().is_file():
        subprocess.run(
            [sys.executable, "-m", "checkers.jvm_start"], check=True, timeout=600, cwd=Path(__file__).parents[2]
        )
    h = History()
    for value in range(20):
        h.op(0, "send", [send(0, value, value)])
        h.op(1, "poll", [poll(0, value, value)])
    run = h.write(tmp_path / "run")
    classes, paths = tmp_path / "classes.log", tmp_path / "paths.log"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "gregor"),
            "check",
            str(run),
            "--spark-conf",
            f"spark.driver.extraJavaOptions=-Xlog:class+load=info:file={classes} -Xlog:class+path=info:file={paths}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    session = [line for line in classes.read_text().splitlines() if " org.apache.spark.sql.SparkSession " in line]
    # On failure, the JVM's own reason (a jar that changed, another class path).
    refused = [
        line
        for line in paths.read_text().splitlines()
        if "checking shared classpath entry" not in line and not line.endswith("] ok")
    ]
    assert session and "shared objects file (top)" in session[0], (session, refused[-5:])


def test_a_reinstalled_pyspark_gets_a_new_archive(monkeypatch, tmp_path):
    # The JVM ignores an archive once a jar's modification time changes,
    # silently: the old name would keep pointing every check at a dead archive.
    jar = tmp_path / "jars" / "spark-core.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "__init__.py"))
    before = jvm_options.archive_path()
    os.utime(jar, (jar.stat().st_atime, jar.stat().st_mtime + 5))
    assert jvm_options.archive_path() != before


def test_a_new_archive_removes_only_its_own_installations_old_ones(tmp_path):
    # Two virtualenvs on one machine each keep their archive; a new one for the
    # same jars (another Java, a reinstalled pyspark) replaces the old one.
    ours, theirs = tmp_path / "ours" / "jars", tmp_path / "theirs" / "jars"
    ours.mkdir(parents=True)
    theirs.mkdir(parents=True)
    cds = tmp_path / "spark-cds"
    cds.mkdir()

    def archive(name: str, jars: Path | None) -> Path:
        path = cds / f"driver-{name}.jsa"
        path.write_bytes(b"jsa")
        if jars is not None:
            jvm_start.note_of(path).write_text(json.dumps({"jars": str(jars)}))
        return path

    kept = archive("new", ours)
    old_ours, other, gone, unnoted = (
        archive("old", ours),
        archive("other", theirs),
        archive("gone", tmp_path / "deleted-venv" / "jars"),
        archive("unnoted", None),
    )
    removed = jvm_start.prune_archives(kept, ours)
    assert sorted(removed) == sorted([old_ours, gone, unnoted])
    assert sorted(cds.iterdir()) == sorted([kept, jvm_start.note_of(kept), other, jvm_start.note_of(other)])
