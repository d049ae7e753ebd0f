"""SIGSTOP/SIGCONT of brokers and of client processes.

A paused broker keeps its sockets and leadership claims while the others
move on; a paused client wakes up as a zombie: a producer with an old epoch,
a consumer that still thinks it owns its partitions.
"""

from __future__ import annotations

import os
import signal
import time

from ground.procfs import proc_state, same_process


def _signal_and_wait(ident: dict, sig: int, stopped: bool, timeout: float = 5.0) -> bool:
    """Sends sig, then waits until /proc shows the process (not) stopped,
    since signal delivery is asynchronous. False if the process is gone."""
    if not same_process(ident):
        return False
    try:
        os.kill(ident["pid"], sig)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = proc_state(ident["pid"])
        if state is None:
            return False
        if (state in "Tt") == stopped:
            break
        time.sleep(0.01)
    return True


def pause_client(ident: dict) -> bool:
    """SIGSTOP; False if the process is already gone."""
    return _signal_and_wait(ident, signal.SIGSTOP, stopped=True)


def resume_client(ident: dict) -> bool:
    """SIGCONT if it is still the same process; False if it is gone."""
    return _signal_and_wait(ident, signal.SIGCONT, stopped=False)


def pause_nodes(lab, names) -> list[str]:
    done = []
    for name in names:
        lab.node(name).pause()
        done.append(name)
    return done


def resume_nodes(lab, names) -> list[str]:
    """Resumes those still paused (a node may have died meanwhile)."""
    done = []
    for name in names:
        node = lab.node(name)
        if node.state() == "paused":
            node.resume()
            done.append(name)
    return done
