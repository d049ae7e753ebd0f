"""A simulated Kafka that emits valid histories, for property-based tests.

Why: the checkers must stay silent on every correct history, whatever the
interleaving; a simulator that is correct by construction gives us as many
such histories as Hypothesis wants, and known places to plant one anomaly.

Model: one append-only log per key. Each client op takes effect atomically at
its completion, so the completion order is a valid serialization:
- idempotent sends land exactly once (ok with offsets, fail: not at all,
  info: at random, offset unknown);
- transactions commit (records + a commit marker) or abort (records stay in
  the log as aborted, plus an abort marker): aborted records and markers take
  offsets that no read_committed consumer returns;
- consumers poll committed records in offset order from their position;
  `assign` moves them anywhere (a reset), and in subscribe mode the group
  rebalances keys in and out during polls (recorded in `rebalance`);
- a failed poll lists records but the consumer seeks back (its position does
  not move); an `info` op crashes the client, which returns under process id
  + concurrency and must assign again.
At the end one fresh client assigns every key and reads each whole key in
one poll (a complete drain).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

MS = 1_000_000


@dataclass
class Record:
    value: int | None  # None for a transaction marker
    committed: bool
    writer: int | None = None  # index of the op's completion event


@dataclass
class Client:
    process: int
    assigned: set = field(default_factory=set)
    position: dict = field(default_factory=dict)  # key -> next offset
    inflight: dict | None = None


@dataclass
class Sim:
    """The state of one simulated run; `events` is the history."""

    rng: random.Random
    keys: int
    concurrency: int
    subscribe: bool
    max_poll: int
    logs: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    clock: int = 0
    next_value: int = 0
    aborted: list = field(default_factory=list)  # (key, offset, value) of aborted records
    polls: list = field(default_factory=list)  # completion indices of ok polls

    def emit(self, event: dict) -> dict:
        self.clock += self.rng.randint(1, 3) * MS
        event = {"index": len(self.events), "time": self.clock, **event}
        self.events.append(event)
        return event

    def value(self) -> int:
        self.next_value += 1
        return self.next_value

    def append(self, key: int, record: Record) -> int:
        log = self.logs.setdefault(key, [])
        log.append(record)
        return len(log) - 1


def _invoke(sim: Sim, client: Client) -> None:
    rng = sim.rng
    kinds = ["send", "txn", "txn", "poll", "poll", "poll", "assign"]
    kind = rng.choice(kinds)
    if not client.assigned and kind == "poll":
        kind = "assign"
    process = client.process
    if kind == "send":
        mops = [{"f": "send", "key": rng.randrange(sim.keys), "value": sim.value()} for _ in range(rng.randint(1, 2))]
        sim.emit({"process": process, "type": "invoke", "f": "send", "mops": mops})
    elif kind == "txn":
        mops = [{"f": "send", "key": rng.randrange(sim.keys), "value": sim.value()} for _ in range(rng.randint(1, 3))]
        if client.assigned and rng.random() < 0.5:
            mops.append({"f": "poll"})
        sim.emit({"process": process, "type": "invoke", "f": "txn", "txn_id": f"tx-{process}", "mops": mops})
    elif kind == "poll":
        mops = [{"f": "poll"}]
        extra = {"group": "g"} if sim.subscribe else {}
        sim.emit({"process": process, "type": "invoke", "f": "poll", "mops": mops, **extra})
    else:
        f = "subscribe" if sim.subscribe else "assign"
        keys = sorted(rng.sample(range(sim.keys), rng.randint(1, sim.keys)))
        sim.emit({"process": process, "type": "invoke", "f": f, "keys": keys})
        client.inflight = {"kind": kind, "mops": None, "keys": keys}
        return
    client.inflight = {"kind": kind, "mops": mops, "keys": None}


def _read(sim: Sim, client: Client, keys) -> list[dict]:
    """Committed records from the client's positions; advances them."""
    out = []
    for key in sorted(keys):
        log = sim.logs.get(key, [])
        offset = client.position.get(key, 0)
        budget = sim.rng.randint(0, sim.max_poll)
        while offset < len(log) and budget > 0:
            record = log[offset]
            if record.committed and record.value is not None:
                out.append({"f": "poll", "key": key, "offset": offset, "value": record.value})
                budget -= 1
            offset += 1
        client.position[key] = offset
    return out


def _complete(sim: Sim, client: Client, clients: dict) -> None:
    rng = sim.rng
    op = client.inflight
    client.inflight = None
    process = client.process
    kind = op["kind"]
    index = len(sim.events)
    outcome = rng.choices(["ok", "fail", "info"], weights=[8, 1, 1])[0]
    if kind == "send":
        done = []
        applied = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        for mop in op["mops"]:
            offset = sim.append(mop["key"], Record(mop["value"], True, index)) if applied else None
            done.append(dict(mop, offset=offset) if outcome == "ok" else dict(mop))
        sim.emit(
            {
                "process": process,
                "type": outcome,
                "f": "send",
                "mops": done,
                **({"error": "_MSG_TIMED_OUT"} if outcome != "ok" else {}),
            }
        )
    elif kind == "txn":
        sends = [m for m in op["mops"] if m["f"] == "send"]
        polled = _read(sim, client, client.assigned) if any(m["f"] == "poll" for m in op["mops"]) else []
        commit = outcome == "ok" or (outcome == "info" and rng.random() < 0.5)
        done = []
        for mop in sends:
            offset = sim.append(mop["key"], Record(mop["value"], commit, index))
            if not commit:
                sim.aborted.append((mop["key"], offset, mop["value"]))
            done.append(dict(mop, offset=offset) if outcome == "ok" else dict(mop))
        for key in sorted({m["key"] for m in sends}):  # one marker per partition
            sim.append(key, Record(None, True))
        if outcome != "ok":
            # The records of a failed op do not move the consumer's position.
            for mop in polled:
                client.position[mop["key"]] = min(client.position[mop["key"]], mop["offset"])
        extra = {"commit_time": sim.clock + MS} if commit else {}
        sim.emit(
            {
                "process": process,
                "type": outcome,
                "f": "txn",
                "txn_id": f"tx-{process}",
                "mops": done + polled,
                **extra,
                **({"error": "ABORTED"} if outcome != "ok" else {}),
            }
        )
    elif kind == "poll":
        rebalance = []
        if sim.subscribe and rng.random() < 0.3:
            key = rng.randrange(sim.keys)
            if key in client.assigned and len(client.assigned) > 1:
                client.assigned.discard(key)
                rebalance.append({"type": "revoked", "keys": [key]})
            elif key not in client.assigned:
                client.assigned.add(key)
                # The group hands the key over at some committed position.
                client.position[key] = rng.randint(0, len(sim.logs.get(key, [])))
                rebalance.append({"type": "assigned", "keys": [key]})
        before = dict(client.position)
        polled = _read(sim, client, client.assigned)
        if outcome == "fail":
            client.position = before
        extra = {"group": "g"} if sim.subscribe else {}
        if rebalance:
            extra["rebalance"] = rebalance
        event = sim.emit({"process": process, "type": outcome, "f": "poll", "mops": polled, **extra})
        if outcome == "ok":
            sim.polls.append(event["index"])
    else:
        f = "subscribe" if sim.subscribe else "assign"
        invoke_keys = op["keys"]
        if outcome != "fail":
            client.assigned = set(invoke_keys)
            for key in invoke_keys:
                client.position[key] = rng.choice([0, client.position.get(key, 0)])
        sim.emit({"process": process, "type": outcome, "f": f, "keys": invoke_keys})
    if outcome == "info":
        # A crashed client comes back as a new process and must assign again.
        del clients[process]
        fresh = Client(process + sim.concurrency)
        clients[fresh.process] = fresh


def simulate(
    seed: int,
    ops: int = 30,
    keys: int = 2,
    concurrency: int = 3,
    subscribe: bool = False,
    max_poll: int = 3,
    abort_one: bool = False,
) -> Sim:
    """Runs the simulation; the history ends with a complete drain.

    `abort_one` adds, before the drain, a transaction that surely aborts, so
    that an aborted record exists for the aborted-read mutation.
    """
    sim = Sim(random.Random(seed), keys, concurrency, subscribe, max_poll)
    clients = {p: Client(p) for p in range(concurrency)}
    started = 0
    while started < ops or any(c.inflight for c in clients.values()):
        client = sim.rng.choice(list(clients.values()))
        if client.inflight is not None:
            _complete(sim, client, clients)
        elif started < ops:
            _invoke(sim, client)
            started += 1
    drain = max(clients) + 1
    if abort_one:
        aborter, drain = drain, drain + 1
        mops = [{"f": "send", "key": 0, "value": sim.value()}]
        sim.emit({"process": aborter, "type": "invoke", "f": "txn", "txn_id": f"tx-{aborter}", "mops": mops})
        offset = sim.append(0, Record(mops[0]["value"], False, len(sim.events)))
        sim.append(0, Record(None, True))
        sim.aborted.append((0, offset, mops[0]["value"]))
        sim.emit(
            {
                "process": aborter,
                "type": "fail",
                "f": "txn",
                "txn_id": f"tx-{aborter}",
                "mops": mops,
                "error": "ABORTED",
            }
        )
    every = list(range(keys))
    sim.emit({"process": drain, "type": "invoke", "f": "assign", "keys": every})
    sim.emit({"process": drain, "type": "ok", "f": "assign", "keys": every})
    for key in every:
        sim.emit({"process": drain, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]})
        records = [
            {"f": "poll", "key": key, "offset": offset, "value": r.value}
            for offset, r in enumerate(sim.logs.get(key, []))
            if r.committed and r.value is not None
        ]
        event = sim.emit({"process": drain, "type": "ok", "f": "poll", "mops": records})
        sim.polls.append(event["index"])
    return sim


# ------------------------------------------------------------- mutations
# Each plants one anomaly in a finished simulation and returns what the
# checker must report: (anomaly name, key, value or None), or None when this
# history offers no place for it.


def _drain_poll(sim: Sim, key: int) -> dict | None:
    for index in reversed(sim.polls):
        event = sim.events[index]
        if event["mops"] and all(m["key"] == key for m in event["mops"]):
            return event
    return None


def _ok_send_values(sim: Sim, key: int) -> set:
    return {
        m["value"]
        for e in sim.events
        if e["type"] == "ok" and e["f"] in ("send", "txn")
        for m in e.get("mops", [])
        if m["f"] == "send" and m["key"] == key
    }


def drop_read(sim: Sim, key: int):
    """Every read of an acknowledged value vanishes: lost-write."""
    drain = _drain_poll(sim, key)
    if drain is None:
        return None
    acked = _ok_send_values(sim, key)
    candidates = [m["value"] for m in drain["mops"][:-1] if m["value"] in acked]
    if not candidates:
        return None
    value = sim.rng.choice(candidates)
    for event in sim.events:
        if event.get("mops") and event["type"] != "invoke":
            event["mops"] = [
                m for m in event["mops"] if not (m["f"] == "poll" and m.get("key") == key and m.get("value") == value)
            ]
    return ("lost-write", key, value)


def duplicate_value(sim: Sim, key: int):
    """A value read again at a second, new offset: duplicate."""
    drain = _drain_poll(sim, key)
    if drain is None:
        return None
    value = sim.rng.choice(drain["mops"])["value"]
    drain["mops"].append({"f": "poll", "key": key, "offset": len(sim.logs[key]), "value": value})
    return ("duplicate", key, value)


def read_aborted(sim: Sim, key: int):
    """The drain returns an aborted record in offset order: aborted-read."""
    aborted = [(o, v) for k, o, v in sim.aborted if k == key]
    drain = _drain_poll(sim, key)
    if not aborted or drain is None:
        return None
    offset, value = sim.rng.choice(aborted)
    drain["mops"].append({"f": "poll", "key": key, "offset": offset, "value": value})
    drain["mops"].sort(key=lambda m: m["offset"])
    return ("aborted-read", key, value)


def reread_earlier(sim: Sim, key: int):
    """The drain's consumer polls an earlier record again: nonmonotonic-poll."""
    drain = _drain_poll(sim, key)
    if drain is None:
        return None
    first = dict(drain["mops"][0])
    process = drain["process"]
    sim.emit({"process": process, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]})
    sim.emit({"process": process, "type": "ok", "f": "poll", "mops": [first]})
    return ("nonmonotonic-poll", key, first["value"])


def swap_in_poll(sim: Sim, key: int):
    """Two records of one poll come back in the wrong order: int-nonmonotonic-poll."""
    drain = _drain_poll(sim, key)
    if drain is None or len(drain["mops"]) < 2:
        return None
    mops = drain["mops"]
    mops[0], mops[1] = mops[1], mops[0]
    return ("int-nonmonotonic-poll", key, None)


def skip_in_poll(sim: Sim, key: int):
    """One poll jumps over a record others read: int-poll-skip."""
    drain = _drain_poll(sim, key)
    if drain is None or len(drain["mops"]) < 3:
        return None
    del drain["mops"][1]
    return ("int-poll-skip", key, None)


MUTATIONS = {
    f.__name__: f for f in (drop_read, duplicate_value, read_aborted, reread_earlier, swap_in_poll, skip_in_poll)
}


def combine(sims: list[Sim]) -> tuple[list[dict], dict, list]:
    """Several independent runs as one history: disjoint keys and processes,
    one after the other in time, so one Spark check covers them all.
    Returns (events, key map, key offset of each run)."""
    events, key_offsets, clock = [], [], 0
    width = max(s.keys for s in sims)
    for number, sim in enumerate(sims):
        base_key, base_process = number * width, number * 10_000
        key_offsets.append(base_key)
        for event in sim.events:
            event = json.loads(json.dumps(event))
            event["time"] += clock
            if isinstance(event["process"], int):
                event["process"] += base_process
            for mop in event.get("mops", []):
                if mop.get("key") is not None:
                    mop["key"] += base_key
            if "keys" in event:
                event["keys"] = [k + base_key for k in event["keys"]]
            for entry in event.get("rebalance", []):
                entry["keys"] = [k + base_key for k in entry["keys"]]
            if "commit_time" in event:
                event["commit_time"] += clock
            events.append(event)
        clock = events[-1]["time"] + MS
    keys = {str(k): ["sim", k] for k in range(width * len(sims))}
    return events, keys, key_offsets


def test_json(sim: Sim) -> dict:
    return {
        "name": "simkafka",
        "system": "simulated",
        "workload": "txn",
        "seed": 0,
        "concurrency": sim.concurrency,
        "keys": {str(k): ["sim", k] for k in range(sim.keys)},
        "client": {
            "acks": "all",
            "enable.idempotence": True,
            "isolation.level": "read_committed",
            "transactional": True,
            "auto.commit": False,
            "subscribe": sim.subscribe,
            "transaction.timeout.ms": 60000,
        },
        "broker": {"min.insync.replicas": 2, "unclean.leader.election.enable": False, "replication.factor": 3},
        "drain": {"time_limit_s": 60, "complete": True},
    }


def combined_test_json(keys: dict, subscribe: bool) -> dict:
    sim = Sim(random.Random(0), 1, 1, subscribe, 1)
    return dict(test_json(sim), keys=keys)


def write(directory: Path, events: list[dict], test: dict) -> Path:
    """Writes history.jsonl (re-indexed 0..n-1) and test.json."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "history.jsonl", "w") as out:
        for index, event in enumerate(events):
            out.write(json.dumps(dict(event, index=index)) + "\n")
    (directory / "test.json").write_text(json.dumps(test))
    return directory
