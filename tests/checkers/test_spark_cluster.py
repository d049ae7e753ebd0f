"""Scale-out: a real Spark standalone cluster (a master and two workers started
from the pyspark installation, on loopback) checks a history through
`gregor check --spark-master spark://...`, with the same results as local mode.

The history is the checker benchmark's synthetic one (40,000 events with a
lost write, a duplicate, an aborted read, a non-monotonic poll and a G1c
cycle planted), so every kind of pass runs on the executors. The workers'
executor logs prove the tasks ran there, not in the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_checkers import generate  # noqa: E402

pytestmark = pytest.mark.spark
GREGOR = str(Path(sys.executable).parent / "gregor")
EVENTS = 40_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def cluster_env(tmp: Path) -> dict:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
    }


def daemon(tmp: Path, name: str, cls: str, *args: str) -> subprocess.Popen:
    log = open(tmp / f"{name}.log", "w")
    return subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), cls, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cluster_env(tmp),
        start_new_session=True,
    )


def master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        return json.load(answer)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """spark://127.0.0.1:<port> of a master with two one-core workers."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    tmp = tmp_path_factory.mktemp("spark-cluster")
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [
        daemon(
            tmp,
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        )
    ]
    try:
        for n in (1, 2):
            work = tmp / f"worker{n}"
            work.mkdir()
            procs.append(
                daemon(
                    tmp,
                    f"worker{n}",
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(free_port()),
                )
            )
        deadline = time.monotonic() + 120
        alive = 0
        while time.monotonic() < deadline:
            try:
                alive = master_state(ui).get("aliveworkers", 0)
            except OSError:
                alive = 0
            if alive == 2:
                break
            assert all(p.poll() is None for p in procs), (
                "a Spark daemon exited: " + (tmp / "master.log").read_text()[-2000:]
            )
            time.sleep(1)
        assert alive == 2, f"{alive} of 2 workers registered with the master in 120 s"
        yield {"url": url, "ui": ui, "dir": tmp}
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def comparable(results: dict) -> dict:
    """results.json without the checker's own section (its timing and master)."""
    return {k: v for k, v in results.items() if k != "checker"}


def test_a_standalone_cluster_finds_what_local_mode_finds(cluster, spark, tmp_path):
    from checkers.check import check_dir

    local_dir, remote_dir = tmp_path / "local", tmp_path / "remote"
    planted = generate(local_dir, EVENTS)["planted"]
    shutil.copytree(local_dir, remote_dir)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    check_dir(local_dir, spark, progress=lambda _m: None)  # the suite's local session
    ours = json.loads((local_dir / "results.json").read_text())
    remote = subprocess.run(
        [
            GREGOR,
            "check",
            str(remote_dir),
            "--spark-master",
            cluster["url"],
            "--spark-conf",
            "spark.executor.memory=512m",
            "--spark-conf",
            "spark.cores.max=2",
            "--spark-conf",
            "spark.driver.host=127.0.0.1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert ours["verdict"] == "invalid"  # planted anomalies
    assert remote.returncode == 1, remote.stdout[-2000:] + remote.stderr[-2000:]
    assert cluster["url"] in remote.stdout
    theirs = json.loads((remote_dir / "results.json").read_text())
    assert set(planted) <= set(ours["anomalies"]), (sorted(planted), sorted(ours["anomalies"]))
    assert theirs["checker"]["spark_master"] == cluster["url"]
    assert comparable(theirs) == comparable(ours)
    # The tasks ran in executors on both workers, not in the driver.
    for n in (1, 2):
        logs = list((cluster["dir"] / f"worker{n}").glob("app-*/*/stderr"))
        assert logs, f"worker{n} ran no executor"
    state = master_state(cluster["ui"])
    apps = state.get("completedapps", []) + state.get("activeapps", [])
    assert any(a.get("name") == "gregor-check" for a in apps)
