"""The session's Python workers start while the load runs, once per session."""

from __future__ import annotations

from pathlib import Path

from checkers.spark import prestart_python_workers


def _python_daemons_under(pid: int) -> list[int]:
    """Pids of pyspark daemon processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and "pyspark.daemon" in command:
            found.append(int(entry.name))
    return found


def test_python_workers_start_in_the_background_once_per_session(spark):
    first = prestart_python_workers(spark)   # None if an earlier check of this session started them
    if first is not None:
        first.join(timeout=120)
        assert not first.is_alive()
    assert prestart_python_workers(spark) is None
    driver = spark._jvm.java.lang.ProcessHandle.current().pid()
    assert _python_daemons_under(driver), "no pyspark daemon under the driver JVM after the prestart"
