"""Kafka's DumpLogSegments, run on a node with the node's own Kafka install.

Why on the node: the segments are there, and so is a Kafka of the lab's
version, whatever the backend (a namespace, a container, an SSH host). The
class is kafka.tools.DumpLogSegments in kafka_2.13 up to 4.2.x and
org.apache.kafka.tools.DumpLogSegments in the kafka-tools jar from 4.3.0
(install.py fetches that jar beside the libs). It reads the live segments of
a running broker. Used by txn_log.py (the transaction log) and segments.py
(the partitions anomalies name).
"""

from __future__ import annotations

from harness.systems.kafka import install

JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def log_files(system, node, directory_globs: list[str]) -> list[str]:
    """The node's segment files (*.log) in the log directories matching `directory_globs`
    (e.g. ["__transaction_state-*"]), in name order: a partition's segments oldest first."""
    data = system.data_dir(node)
    patterns = " ".join(f"{data}/{pattern}/*.log" for pattern in directory_globs)
    listed = node.exec(["sh", "-c", f"ls -1 {patterns} 2>/dev/null"], check=False)
    return sorted(f for f in listed.stdout.split() if f.endswith(".log"))


def run(system, node, files: list[str], flags: list[str], timeout: float = 300) -> str:
    """DumpLogSegments' output for `files` on the node ("" for no files); RuntimeError,
    naming the node and the tool's last line, when it fails."""
    if not files:
        return ""
    home = system.state()["nodes"][node.name]["kafka_home"]
    classpath = f"{home}/libs/*" + (f":{home}/tools/*" if install.needs_tools(system.version) else "")
    argv = ["java", *JVM, "-cp", classpath, install.dump_log_segments(system.version), *flags]
    argv += ["--files", ",".join(files)]
    result = node.exec(argv, check=False, timeout=timeout)
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{node.name}: DumpLogSegments failed: {said[:300]}")
    return result.stdout
