"""The JVM of a client on Kafka's Java client is part of the client process for every
fault (no Kafka needed: a producer's JVM starts without reaching a broker).

A client process spawned by the pool leads its own process group, its JVM starts
inside it and is listed in the client registry; a pause stops both, a kill-client
kills both, a client that dies takes its JVM along (PR_SET_PDEATHSIG), a crashed
run's leftovers are killed from the registry, and a client in a network place of
its own starts its JVM there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

import pytest
from polling import wait_until

from ground.procfs import identity, proc_state
from nemesis.pause import pause_client, resume_client
from workloads.client import ClientSpec
from workloads.client_pool import ClientPool
from workloads.client_registry import kill_leftover_clients, registry_dir
from workloads.history_writer import HistoryWriter
from workloads.java_client import build

KEYS = {"0": ["t", 0]}


@pytest.fixture(scope="module")
def java_version():
    """The Java client the suite runs (./setup builds the newest; built here if missing)."""
    try:
        return build.install(progress=print).version
    except Exception as error:  # noqa: BLE001 - no JDK or no network: said, not failed
        pytest.skip(f"Kafka's Java client cannot be built here: {error}")


def spec(version, start_ns, place=None) -> ClientSpec:
    return ClientSpec(
        slot=0,
        process=0,
        role="jvm",
        module="fake_clients",
        stride=1,
        seed=1,
        keys=[0],
        key_map=KEYS,
        bootstrap="unused",
        options={"library": "java", "library.version": version},
        start_ns=start_ns,
        deadline=time.monotonic() + 120,
        place=place,
    )


@pytest.fixture
def pool(tmp_path):
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    found = ClientPool(writer, f"jvmtest{os.getpid()}", log=lambda m: None)
    yield found
    found.stop_all(grace_s=5)
    writer.close()


def jvm_of(pool) -> int:
    assert wait_until(lambda: pool.live[0].jvms, timeout=60), "the client's JVM did not start"
    return pool.live[0].jvms[0]


def stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as handle:
        text = handle.read()
    return text[text.rindex(")") + 2 :].split()


def gone(pid: int) -> bool:
    return proc_state(pid) in (None, "Z")


def test_the_jvm_is_in_the_client_process_group_and_the_registry(pool, java_version):
    pool.spawn(spec(java_version, pool.writer.start_ns))
    client, jvm = pool.pid(0), jvm_of(pool)
    assert int(stat(jvm)[1]) == client  # its parent is the client
    assert int(stat(jvm)[2]) == int(stat(client)[2]) == client  # one process group, led by the client
    assert sorted(int(e) for e in os.listdir(registry_dir(pool.lab_name))) == sorted([client, jvm])


def test_a_pause_stops_the_jvm_too_and_a_resume_lets_it_go(pool, java_version):
    pool.spawn(spec(java_version, pool.writer.start_ns))
    client, jvm = pool.pid(0), jvm_of(pool)
    ident = identity(client)
    assert pause_client(ident)
    assert proc_state(client) in "Tt" and proc_state(jvm) in "Tt"
    time.sleep(0.5)
    assert proc_state(jvm) in "Tt", "nothing woke the JVM while its client was paused"
    assert resume_client(ident)
    assert proc_state(client) not in "Tt" and proc_state(jvm) not in "Tt"


def test_a_killed_client_takes_its_jvm_along_and_is_replaced(pool, java_version):
    pool.spawn(spec(java_version, pool.writer.start_ns))
    jvm = jvm_of(pool)
    pool.kill_and_replace(0)
    assert wait_until(lambda: gone(jvm), timeout=5), "the killed client's JVM lives on"
    assert str(jvm) not in os.listdir(registry_dir(pool.lab_name))


def test_a_client_that_dies_alone_takes_its_jvm_along(pool, java_version):
    """SIGKILL of the client process only (not its group): PR_SET_PDEATHSIG ends the JVM."""
    pool.spawn(spec(java_version, pool.writer.start_ns))
    client, jvm = pool.pid(0), jvm_of(pool)
    os.kill(client, signal.SIGKILL)
    assert wait_until(lambda: gone(jvm), timeout=5), "the orphaned JVM lives on"


def test_a_crashed_runs_paused_client_and_jvm_are_killed_from_the_registry(pool, java_version):
    pool.spawn(spec(java_version, pool.writer.start_ns))
    client, jvm = pool.pid(0), jvm_of(pool)
    assert pause_client(identity(client))
    assert kill_leftover_clients(pool.lab_name) >= 1
    assert wait_until(lambda: gone(client) and gone(jvm), timeout=5), "a leftover lives on"


@dataclass(frozen=True)
class Place:
    """A network namespace of the test's own, entered as a ClientPlace enters its place."""

    name: str

    def enter(self) -> None:
        from ground import namespaces

        namespaces.enter(self.name)


@pytest.fixture
def netns():
    """A network namespace of the test's own (asked for before the pool, so removed after it)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"gjvm{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "delete", name], check=False)


def test_a_client_in_a_place_of_its_own_starts_its_jvm_there(netns, pool, java_version):
    pool.spawn(spec(java_version, pool.writer.start_ns, place=Place(netns)))
    jvm = jvm_of(pool)
    assert os.stat(f"/proc/{jvm}/ns/net").st_ino == os.stat(f"/var/run/netns/{netns}").st_ino
    assert os.stat(f"/proc/{jvm}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
