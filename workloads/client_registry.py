"""The registry of a lab's client processes, so a crashed run's are found.

Every child of a run is listed by pid and start time, and so is every JVM a
child starts for Kafka's Java client; the next run or `gregor lab down`
SIGKILLs whatever a crashed controller left, paused or not (a client with its
process group), and only forgets an entry whose pid now belongs to another
process.
"""

from __future__ import annotations

import os
import signal

from ground.paths import clients_dir
from ground.procfs import proc_stat
from ground.signals import signal_client


def _start_time(pid: int) -> str | None:
    stat = proc_stat(pid)
    return str(stat[1]) if stat else None


def registry_dir(lab_name: str) -> str:
    return str(clients_dir(lab_name))


def register_client(lab_name: str, pid: int) -> None:
    """Lists a child process of the run, so that `kill_leftover_clients`
    finds it if the controller crashes before it ends."""
    started = _start_time(pid)
    if started is None:
        return
    os.makedirs(registry_dir(lab_name), exist_ok=True)
    with open(os.path.join(registry_dir(lab_name), str(pid)), "w") as handle:
        handle.write(started)


def unregister_client(lab_name: str, pid: int) -> None:
    try:
        os.unlink(os.path.join(registry_dir(lab_name), str(pid)))
    except FileNotFoundError:
        pass


def kill_leftover_clients(lab_name: str, progress=None) -> int:
    """SIGKILLs client processes a crashed run of this lab left (paused or not).

    For `gregor run` (before it starts) and `gregor lab down`. A registry
    entry whose pid now belongs to another process (other start time) is
    only forgotten.
    """
    directory = registry_dir(lab_name)
    killed = 0
    if not os.path.isdir(directory):
        return 0
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        try:
            pid = int(entry)
            with open(path) as handle:
                started = handle.read().strip()
        except (ValueError, OSError):
            continue
        if _start_time(pid) == started:
            if signal_client(pid, signal.SIGKILL):  # delivered to stopped processes too; with a JVM
                killed += 1
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if killed and progress:
        progress(f"killed {killed} client process(es) left by a crashed run")
    return killed
