"""The wire relays of a lab, on the controller's host: started, asked, swept.

Why here: the relay (harness/wire) knows nothing of labs. A lab has at most
two: the clients' one, tagged with the lab's name, serving the namespaces of
the run's client places; and the brokers' one (broker sources), tagged
`<lab>.brokers`, serving the broker nodes' own namespaces (the namespaces
backend). Their REDIRECT rules and processes carry the tag, so a sweep by the
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


def brokers_tag(lab: str) -> str:
    """The tag of the lab's relay on its brokers' own connections (the clients' relay has the lab's)."""
    return f"{lab}.brokers"


def start(tag: str, namespaces: list[str], dests: list[str], log_path: str | None = None) -> tuple:
    """Starts the relay tagged `tag` (a lab's name, or brokers_tag) for these namespaces and broker
    addresses (after sweeping any old one); returns (process, its ready line: ports per namespace,
    control socket). GregorError if it fails."""
    sweep(tag, namespaces)
    command = [sys.executable, "-m", "harness.wire.relay", "serve", "--tag", tag]
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
        sweep(tag, namespaces)
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


def cut_connections(node, dests: list[str]) -> int:
    """Destroys, once, the node's open TCP connections to these ports (`ss -K`), so that its process
    opens them again, through the REDIRECT rules now in place; returns how many were cut.

    Why: brokers open their connections to each other at start and keep them; a relay put in place
    later would see only the ones opened after it."""
    ports = sorted({dest.rpartition(":")[2] for dest in dests})
    expression = ["("]
    for port in ports:
        expression += [*(["or"] if len(expression) > 1 else []), "dport", "=", f":{port}"]
    result = node.exec(["ss", "-K", "-tnH", "state", "established", *expression, ")"], check=False)
    if result.returncode:
        raise GregorError(f"{node.name}: ss -K could not cut its connections: {(result.stderr or '').strip()[:200]}")
    return sum(1 for line in result.stdout.splitlines() if line.strip())
