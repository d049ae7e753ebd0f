"""The wire relay of a lab's clients, on the controller's host: started, asked, swept.

Why here: the relay (harness/wire) knows nothing of labs. A lab has at most
one, tagged with the lab's name, serving the namespaces of the run's client
places; its REDIRECT rules and its process carry that tag, so a sweep by the
tag finds them after any crash (`gregor run`'s heal, `gregor lab down`).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

from ground.errors import GregorError
from harness.wire.control import RelayError, call
from harness.wire.places import default_control

READY_TIMEOUT_S = 15.0


def control_path(lab: str) -> str:
    return default_control(lab)


def start(lab: str, namespaces: list[str], dests: list[str], log_path: str | None = None) -> tuple:
    """Starts the lab's relay for these namespaces and broker addresses (after sweeping any old one);
    returns (process, its ready line: ports per namespace, control socket). GregorError if it fails."""
    sweep(lab, namespaces)
    command = [sys.executable, "-m", "harness.wire.relay", "serve", "--tag", lab]
    for dest in dests:
        command += ["--dest", dest]
    for namespace in namespaces:
        command += ["--netns", namespace]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    finally:
        if log_path:
            log.close()
    line = _ready_line(process)
    if line is None:
        code = process.poll()
        sweep(lab, namespaces)
        where = f"; see {log_path}" if log_path else ""
        raise GregorError(f"the wire relay did not start (exit status {code}){where}")
    return process, json.loads(line)


def _ready_line(process: subprocess.Popen) -> str | None:
    """The relay's one line on stdout, once its listeners and rules are in place."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                line = process.stdout.readline().decode(errors="replace").strip()
                return line if line.startswith("{") else None
    return None


def ask(lab: str, request: dict) -> dict:
    """One control request to the lab's relay; GregorError (one line) if it refuses or is gone."""
    try:
        return call(control_path(lab), request)
    except RelayError as error:
        raise GregorError(f"wire relay of lab {lab}: {error}") from None


def sweep(lab: str, namespaces: list[str] = ()) -> dict:
    """Ends the lab's relays and removes their REDIRECT rules here and in each namespace that exists."""
    there = [name for name in namespaces if os.path.exists(f"/var/run/netns/{name}")]
    command = [sys.executable, "-m", "harness.wire.relay", "sweep", "--tag", lab]
    for name in there:
        command += ["--netns", name]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode:
        raise GregorError(f"sweeping the wire relay of lab {lab} failed: {result.stderr.strip()[-300:]}")
    return json.loads(result.stdout)
