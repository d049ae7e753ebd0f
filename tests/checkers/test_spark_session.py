"""The session's Python workers start while the load runs, once per session, and
the driver JVM starts with few malloc arenas; a setting for one block is put back."""

from __future__ import annotations

import subprocess

from checkers.passes import prestart_python_workers
from checkers.spark import session_conf


def test_python_workers_start_in_the_background_once_per_session(spark):
    first = prestart_python_workers(spark)  # None if an earlier check of this session started them
    if first is not None:
        first.join(timeout=120)
        assert not first.is_alive()
    assert prestart_python_workers(spark) is None
    driver = spark._jvm.java.lang.ProcessHandle.current().pid()
    daemons = subprocess.run(["pgrep", "-P", str(driver), "-f", "pyspark.daemon"], capture_output=True, text=True)
    assert daemons.stdout.split(), "no pyspark daemon under the driver JVM after the prestart"


def test_the_driver_jvm_runs_with_two_malloc_arenas(spark):
    driver = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{driver}/environ", "rb") as environ:
        variables = dict(item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item)
    assert variables.get(b"MALLOC_ARENA_MAX") == b"2"


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
