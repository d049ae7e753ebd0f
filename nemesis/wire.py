"""Faults aimed at single Kafka requests: a rule of the wire relay switched on, then off.

The relay (harness/wire, docs/WIRE.md) sits between the clients' namespaces
and the brokers for the whole run; this fault only adds one rule to it for
one client's connections, and its heal removes the rule. Removing a rule
touches no connection, so the heal breaks nothing; what the rule took keeps
its fate. The heal records what the relay did to the requests it took.

A node target (coordinator, leader, node:n2, all, ...) is a broker source: the
rule goes to the lab's other relay, the one on the brokers' own connections to
each other, limited to the requests the target nodes send (WriteTxnMarkers from
a transaction coordinator, AddPartitionsToTxn verification from a leader).

A rule is written `ACTION[:KEY=VALUE]...` (--wire-rule), e.g.
`delay:api=EndTxn:ms=3000:count=1`; parse_rule() turns it into the relay's
own rule fields.
"""

from __future__ import annotations

import re
from collections import Counter

from ground.errors import GregorError
from ground.faults import WIRE
from nemesis.targets import TargetUnavailable
from nemesis.values import fault_value

NEEDS_PLACE = True  # a client source: the relay serves the clients' own namespaces

# ACTION as written -> the relay's action
ACTIONS = {"delay": "delay", "hold": "hold", "drop-response": "drop_response", "duplicate": "duplicate"}
# KEY as written -> the relay's rule field, and whether it takes a whole number
KEYS = {
    "api": ("api", False),
    "ms": ("delay_ms", True),
    "on": ("on", False),
    "txn": ("transactional_id", False),
    "producer": ("producer_id", True),
    "dest": ("dest", False),
    "count": ("count", True),
    "after": ("after_ms", True),
    "for": ("for_ms", True),
}
EXAMPLE = "delay:api=EndTxn:ms=3000:count=1"
REQUESTS_SHOWN = 20  # per heal: the first requests a rule took, as the history keeps them


def parse_rule(text: str) -> dict:
    """'delay:api=EndTxn:ms=3000' -> the relay's rule fields; a bad rule is one GregorError line.

    Only a ':' followed by KEY= separates fields, so a dest's HOST:PORT stays whole."""
    text = str(text).strip()
    action, *pairs = re.split(r":(?=[a-z]+=)", text)
    if action not in ACTIONS:
        raise GregorError(f"--wire-rule {text!r}: begins with one of {', '.join(ACTIONS)}, e.g. {EXAMPLE}")
    rule: dict = {"action": ACTIONS[action]}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in KEYS:
            raise GregorError(f"--wire-rule {text!r}: unknown field {key!r}; use {', '.join(KEYS)}")
        field, whole = KEYS[key]
        if field in rule:
            raise GregorError(f"--wire-rule {text!r}: {key} is given twice")
        if whole:
            if not value.isdigit():
                raise GregorError(f"--wire-rule {text!r}: {key} takes a whole number, not {value!r}")
            rule[field] = int(value)
        elif not value:
            raise GregorError(f"--wire-rule {text!r}: {key} is empty")
        elif key == "on" and value not in ("request", "response"):
            raise GregorError(f"--wire-rule {text!r}: on is request or response, not {value!r}")
        else:
            rule[field] = value
    if action in ("delay", "hold") and "delay_ms" not in rule:
        raise GregorError(f"--wire-rule {text!r}: {action} needs ms=MILLISECONDS, e.g. {EXAMPLE}")
    if action not in ("delay", "hold") and "delay_ms" in rule:
        raise GregorError(f"--wire-rule {text!r}: ms is for delay and hold only")
    return rule


def did(report: dict) -> dict:
    """What the relay did under one rule, from its final report: counts, and the first requests.

    took: requests the rule took; forwarded: those that reached the broker by the heal (a delayed
    or held one may still be on its way); answered: those whose response came; and per action the
    requests delayed, held or duplicated, or the responses dropped."""
    events = report.get("events", [])

    def count(field: str) -> int:
        return sum(1 for event in events if event.get(field))

    out: dict = {"took": report.get("matched", 0), "state": report.get("state")}
    action = report.get("rule", {}).get("action")
    if action == "drop_response":
        out["responses_dropped"] = count("response_dropped")
    else:
        out[{"delay": "delayed", "hold": "held", "duplicate": "duplicated"}.get(action, "taken")] = out["took"]
    out.update(forwarded=count("forwarded_at"), answered=count("response"))
    if action == "duplicate":
        out["duplicate_responses_swallowed"] = count("duplicate_response")
    if count("lost"):
        out["lost"] = count("lost")
    out["by_api"] = dict(Counter(event.get("api") for event in events))
    if report.get("events_dropped"):
        out["events_not_kept"] = report["events_dropped"]  # counted above only as "took"
    out["requests"] = [shown(event) for event in events[:REQUESTS_SHOWN]]
    return out


def shown(event: dict) -> dict:
    """One request a rule took, as the history keeps it: what it was, the batches it carried
    (producer id, epoch, base sequence) or whether it committed (EndTxn), and what the broker
    answered (error codes; Produce's base offsets), even when the client never heard it."""
    kept = {
        key: event[key]
        for key in (
            "api",
            "version",
            "correlation_id",
            "client_id",
            "transactional_ids",
            "committed",
            "t",
            "forwarded_at",
            "response_dropped",
        )
        if event.get(key) not in (None, [], "")
    }
    batches = [
        {key: value for key, value in batch.items() if key not in BATCH_LEFT_OUT and value is not None}
        for batch in event.get("producers") or ()
    ]
    if batches:
        kept["batches"] = batches
    response = event.get("response")
    if response:
        answer = {"error": response["error"]} if "error" in response else {}
        if response.get("partitions"):
            answer["partitions"] = [
                {key: value for key, value in part.items() if key not in ANSWER_LEFT_OUT}
                for part in response["partitions"]
            ]
        kept["answer"] = answer
    return kept


BATCH_LEFT_OUT = ("topic", "control")  # a batch keeps its partition, producer id, epoch, base sequence...
ANSWER_LEFT_OUT = ("topic", "log_start_offset", "message")  # ...an answer its partition, error, base offset


# --- the fault (ground/faults.py: wire) ---------------------------------------


def start(nemesis, step, target):
    """Switches the step's rule on for the target client's connections (its namespace), or for
    the target nodes' own connections to the brokers (a node target)."""
    if target.nodes:
        return _start_on_brokers(nemesis, step, target)
    client = target.clients[0]
    relay = (getattr(nemesis.ctx, "test", None) or {}).get("wire_relay")
    return switch_on(nemesis.lab, nemesis.ledger, relay, client.place, client.process, target.role, step.rule)


def switch_on(lab, ledger, relay: dict | None, place: str | None, process: int, role: str, text: str):
    """Rule `text` on in the relay for one client's place, in the fault ledger first (so a crash's
    heal finds it); the ledger entry and the fault's recorded value. Also the workloads' own
    conductors (workloads/script.py) switch rules through here."""
    if not relay:
        raise GregorError("no wire relay in this run (a wire fault needs the relay the run starts)")
    namespace = relay["places"].get(place)
    if namespace is None:
        raise TargetUnavailable(f"client {process} has no namespace the relay serves")
    rule = dict(parse_rule(text), netns=namespace)
    entry = ledger.add({"fault": WIRE, "nodes": [], "clients": [{"process": process}], "role": role, "rule": rule})
    rule = dict(rule, id=entry["id"])  # the relay's rule id is the ledger entry's: the heal needs no other
    lab.wire_call({"op": "add", "rule": rule})
    return entry, fault_value([], [process], role=role, rule=text, relay_rule=rule)


def _start_on_brokers(nemesis, step, target):
    relay = (getattr(nemesis.ctx, "test", None) or {}).get("wire_brokers")
    if not relay:
        raise GregorError("no wire relay on the brokers in this run (a node target needs the one the run starts)")
    namespaces = [relay["places"][node] for node in target.nodes if node in relay["places"]]
    if not namespaces:
        raise TargetUnavailable(f"{', '.join(target.nodes)} sends no broker-to-broker requests (no broker there)")
    rule = dict(parse_rule(step.rule), netns=namespaces)
    nodes = [node for node in target.nodes if node in relay["places"]]
    entry = nemesis.ledger.add(
        {"fault": WIRE, "nodes": nodes, "clients": [], "role": target.role, "rule": rule, "relay": "brokers"}
    )
    rule = dict(rule, id=entry["id"])
    nemesis.lab.wire_call({"op": "add", "rule": rule}, brokers=True)
    return entry, fault_value(nodes, role=target.role, rule=step.rule, relay_rule=rule, source="brokers")


def heal(lab, entry: dict) -> dict:
    """Switches the rule off (no connection is touched); what the relay did under it.

    After a crash the relay is gone (the lab's heal sweeps it): nothing to switch off."""
    try:
        answer = lab.wire_call({"op": "remove", "id": entry["id"]}, brokers=entry.get("relay") == "brokers")
    except GregorError as error:
        return {"rule_off": False, "why": str(error)}
    return {"rule_off": True, **did(answer["report"])}
