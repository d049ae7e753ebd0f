"""The Java driver's cache keeps the builds other checkouts use (workloads/java_client/build.py)."""

import os

from workloads.java_client import build


def make_build(home, name: str, used_at: float, marker: str = build.LAST_USED):
    classes = home / f"driver-{name}"
    classes.mkdir(parents=True)
    (classes / build.DRIVER_JAR).write_bytes(b"jar")
    (classes / marker).touch()
    os.utime(classes / marker, (used_at, used_at))
    return classes


def test_a_new_build_removes_only_the_least_recently_used_beyond_the_kept_few(tmp_path):
    old = [make_build(tmp_path, f"old{i}", 1000.0 + i) for i in range(5)]
    by_jar_time = make_build(tmp_path, "jaronly", 1002.5, marker=build.DRIVER_JAR)
    new = make_build(tmp_path, "new", 900.0)  # just built: kept whatever its time says
    removed = build.prune_builds(tmp_path, new)
    kept = sorted(p.name for p in tmp_path.glob("driver-*"))
    # the new build and the KEPT_BUILDS - 1 most recently used others
    assert kept == sorted(["driver-new", "driver-old4", "driver-old3", "driver-jaronly"])
    assert sorted(removed) == sorted([old[0], old[1], old[2]])
    assert by_jar_time.exists()


def test_a_few_builds_are_all_kept(tmp_path):
    builds = [make_build(tmp_path, f"b{i}", 1000.0 + i) for i in range(build.KEPT_BUILDS)]
    assert build.prune_builds(tmp_path, builds[0]) == []
    assert all(b.exists() for b in builds)
