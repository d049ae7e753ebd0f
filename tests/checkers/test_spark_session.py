"""The session's Python workers start while the load runs, once per session, and
the driver JVM and its workers start with Gregor's malloc settings; a setting for one block is put back."""

from __future__ import annotations

import os
import subprocess

from checkers.passes import prestart_python_workers
from checkers.spark import HEAP_POLICY, MMAP_THRESHOLD_BYTES, fix_mmap_threshold, session_conf


def test_python_workers_start_in_the_background_once_per_session(spark):
    first = prestart_python_workers(spark)  # None if an earlier check of this session started them
    if first is not None:
        first.join(timeout=120)
        assert not first.is_alive()
    assert prestart_python_workers(spark) is None
    driver = spark._jvm.java.lang.ProcessHandle.current().pid()
    daemons = subprocess.run(["pgrep", "-P", str(driver), "-f", "pyspark.daemon"], capture_output=True, text=True)
    assert daemons.stdout.split(), "no pyspark daemon under the driver JVM after the prestart"


def _environ(pid: int) -> dict[bytes, bytes]:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        return dict(item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item)


def test_the_driver_jvm_and_its_python_workers_run_with_gregors_malloc_settings(spark):
    prestarted = prestart_python_workers(spark)
    if prestarted is not None:
        prestarted.join(timeout=120)
    driver = spark._jvm.java.lang.ProcessHandle.current().pid()
    daemons = subprocess.run(["pgrep", "-P", str(driver), "-f", "pyspark.daemon"], capture_output=True, text=True)
    for pid in [driver, *map(int, daemons.stdout.split())]:
        variables = _environ(pid)
        assert variables.get(b"MALLOC_ARENA_MAX") == b"2", pid
        assert variables.get(b"MALLOC_MMAP_THRESHOLD_") == b"4194304", pid
    assert daemons.stdout.split(), "no pyspark daemon under the driver JVM"


def test_session_conf_puts_back_a_value_or_its_absence(spark):
    key = "spark.gregor.test.setting"
    with session_conf(spark, key, "a"):
        assert spark.conf.get(key) == "a"
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "b")
    with session_conf(spark, key, "c"):
        assert spark.conf.get(key) == "c"
    assert spark.conf.get(key) == "b"
    spark.conf.unset(key)


def test_the_mmap_threshold_is_fixed_unless_the_user_chose_one(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    fix_mmap_threshold()
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD_BYTES) == "4194304"
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    fix_mmap_threshold()
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == "1048576"
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    fix_mmap_threshold()  # this process's threshold back to Gregor's


def test_the_driver_jvm_sizes_its_heap_by_gregors_policy(spark):
    arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    for option in HEAP_POLICY:
        assert option in arguments, arguments
    flags = spark._jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        spark._jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    assert flags.getVMOption("GCTimeRatio").getValue() == "4"
    assert flags.getVMOption("MaxHeapFreeRatio").getValue() == "40"
    assert flags.getVMOption("UseParallelGC").getValue() == "true"
    assert flags.getVMOption("UseG1GC").getValue() == "false"
    assert spark.sparkContext.getConf().get("spark.memory.fraction") == "0.4"


def test_arrow_in_the_jvm_runs_without_its_per_read_checks(spark):
    """The JVM reads Arrow without bounds or repeated null checks, and
    writes batches for Python workers without sizing them after each row."""
    assert not spark._jvm.org.apache.arrow.memory.BoundsChecking.BOUNDS_CHECKING_ENABLED
    assert not spark._jvm.org.apache.arrow.vector.NullCheckingForGet.NULL_CHECKING_ENABLED
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") in ("2147483647", "2147483647b")
