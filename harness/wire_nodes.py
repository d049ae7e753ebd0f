"""The brokers' wire relays on the nodes themselves (the docker and ssh backends): one per broker
node, in the node's own network namespace, reached only through the node's exec.

Why: on the namespaces backend the controller's host enters each node's namespace and one relay
serves them all (harness/wire_relay.py); a container or an SSH host is entered only through its
backend's exec. So the relay package (harness/wire/) is built into one file, a zipapp, put into
the node's tools and run there: `python3 gregor-wire.pyz relay serve ...` (the relay) and
`... control ...` (its control client, one call per exec). Its process and its REDIRECT rules carry
the tag as on the host, so a sweep on each node (`... relay sweep --tag T`) finds them after a crash.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import harness.wire as relay_package
from ground.errors import GregorError
from harness.wire.places import ZIPAPP

WIRE_DIR = Path(relay_package.__file__).resolve().parent  # shipped as a package of this name
READY_TIMEOUT_S = 15.0
ROOT_MAIN = "import sys\n\nfrom wire.__main__ import main\n\nsys.exit(main())\n"
# Sweeps with the shipped file if it is there; without it no relay of ours can have run there.
_SWEEP = 'test -f "$1" || { echo "{}"; exit 0; }; py=$2; shift 2; exec "$py" "$@"'


def build(path: str) -> str:
    """Writes the relay package as a zipapp at `path`: the package as `wire/`, and a `__main__.py`
    that runs its entry point (harness/wire/__main__.py); returns path."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", ROOT_MAIN)
        for module in sorted(WIRE_DIR.glob("*.py")):
            archive.write(module, f"{WIRE_DIR.name}/{module.name}")
    return path


def shipped(node) -> str:
    """Where the zipapp lives on the node: with its other tools, under the lab's directory there."""
    return f"{node.home}/tools/{ZIPAPP}"


def ship(node) -> str:
    """Builds the zipapp from this checkout and uploads it to the node (every start: it is small,
    and a node never runs an older relay than the controller's)."""
    with tempfile.TemporaryDirectory(prefix="gregor-wire-") as directory:
        node.upload(build(os.path.join(directory, ZIPAPP)), shipped(node))
    return shipped(node)


def command(node, *args: str) -> list[str]:
    return [node.python, shipped(node), *args]


def log_path(node) -> str:
    return f"{node.home}/wire-relay-brokers.log"


def start(node, tag: str, dests: list[str]) -> dict:
    """Ships the relay, sweeps any old one of the tag there, starts it on the node for these broker
    addresses and waits for its ready line (its port, its control socket); GregorError if it fails."""
    ship(node)
    sweep(node, tag)
    log = log_path(node)
    node.exec(["rm", "-f", log])
    argv = command(node, "relay", "serve", "--tag", tag)
    for dest in dests:
        argv += ["--dest", dest]
    node.spawn(argv, log=log, pid_file=f"{node.home}/wire-relay-brokers.pid")
    ready = node.await_log(log, _ready_line, READY_TIMEOUT_S, 0.1)
    if ready:
        return json.loads(ready)
    sweep(node, tag)
    text = (node.read_text(log) or "").strip()
    raise GregorError(f"{node.label}: the wire relay did not start: {text[-300:] or 'nothing on its log'}")


def _ready_line(text: str) -> str | None:
    """The relay's ready line in its log, once it has written it."""
    return next((line for line in text.splitlines() if line.startswith('{"ready"')), None)


def ask(node, tag: str, request: dict) -> dict:
    """One control request to the node's relay; GregorError (one line) if it refuses or is gone."""
    result = node.exec(command(node, "control", "--tag", tag, "raw", json.dumps(request)), check=False, timeout=20)
    if result.returncode:
        why = (result.stderr or result.stdout or f"exit status {result.returncode}").strip().splitlines()
        raise GregorError(f"wire relay {tag} on {node.label}: {why[-1][:300] if why else 'no answer'}")
    return json.loads(result.stdout)


def sweep(node, tag: str) -> dict:
    """Ends the tag's relays on the node (SIGTERM, then SIGKILL) and removes its REDIRECT rules there."""
    argv = ["sh", "-c", _SWEEP, "sh", shipped(node), *command(node, "relay", "sweep", "--tag", tag)]
    result = node.exec(argv, check=False, timeout=60)
    if result.returncode:
        raise GregorError(f"{node.label}: sweeping wire relay {tag} failed: {(result.stderr or '').strip()[-300:]}")
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return {key: found.get(key, 0) for key in ("relays", "killed", "redirects_removed")}


# --- one answer from every node's relay, as the host's one relay would give it -------------------


def ask_all(nodes: list, tag: str, request: dict) -> dict:
    """A request to the relays of these nodes, answered as one relay serving them all would: an added
    rule goes to the nodes its `netns` names (node names here) without that limit, a rule's report
    sums what each node's relay took, links and counts are those of all of them."""
    op = request.get("op")
    if op == "add":
        rule = dict(request["rule"])
        wanted = rule.pop("netns", None)
        wanted = None if wanted is None else {wanted} if isinstance(wanted, str) else set(wanted)
        chosen = [node for node in nodes if wanted is None or node.name in wanted]
        if not chosen:
            raise GregorError(f"wire relay {tag}: no node of {sorted(wanted)} has a relay")
        for node in chosen:
            answer = ask(node, tag, {"op": "add", "rule": rule})
        return answer
    answers, errors = {}, []
    for node in nodes:
        try:
            answers[node.name] = ask(node, tag, request)
        except GregorError as error:
            errors.append(error)
    if op == "remove":
        reports = {name: answer["report"] for name, answer in answers.items()}
        if not reports:
            raise errors[0] if errors else GregorError(f"wire relay {tag}: no node to ask")
        return {"ok": True, "report": merged_report(reports)}
    if errors:
        raise errors[0]
    if op == "links":
        return {"ok": True, "links": [dict(link, netns=name) for name, a in answers.items() for link in a["links"]]}
    if op == "status":
        return {"ok": True, **merged_status(answers)}
    if op in ("clear", "report"):
        return {"ok": True, "reports": [report for answer in answers.values() for report in answer["reports"]]}
    raise GregorError(f"wire relay {tag}: op {op!r} is not asked of the nodes' relays")


def merged_report(reports: dict) -> dict:
    """One rule's reports from several nodes' relays as one: what each took, in time order."""
    first = next(iter(reports.values()))
    events = sorted((event for report in reports.values() for event in report["events"]), key=lambda e: e["t"])
    return {
        **first,
        "matched": sum(report["matched"] for report in reports.values()),
        "events": events,
        "events_dropped": sum(report["events_dropped"] for report in reports.values()),
        "by_node": {name: report["matched"] for name, report in reports.items()},
    }


def merged_status(answers: dict) -> dict:
    """The nodes' relays' counts summed; their rules (the same on every node a fault named) once."""
    totals = Counter()
    for answer in answers.values():
        totals.update(
            {key: value for key, value in answer.items() if type(value) is int and key not in ("pid", "port")}
        )
    rules = sorted({rule for answer in answers.values() for rule in answer["rules"]})
    return {
        **totals,
        "rules": rules,
        "refusals": [refusal for answer in answers.values() for refusal in answer["refusals"]],
        "nodes": {name: {"pid": a["pid"], "port": a["port"], "links": a["links"]} for name, a in answers.items()},
    }
