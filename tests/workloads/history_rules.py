"""The rules of docs/HISTORY.md, checked on a real history (test helper).

Each rule returns a list of problems (strings naming the event index), so a
failing test prints exactly which events break the format.
"""

from __future__ import annotations

import json

COMPLETIONS = {"ok", "fail", "info"}
CLIENT_FS = {"send", "poll", "txn", "commit", "init", "assign", "subscribe", "crash"}


def load(path: str) -> list[dict]:
    with open(path, "rb") as handle:
        return [json.loads(line) for line in handle]


def problems(history: list[dict], test: dict, cut_short: bool = False) -> list[str]:
    found: list[str] = []
    keys = {int(k) for k in test["keys"]}
    concurrency = int(test["concurrency"])
    pending: dict = {}
    crashed: set = set()
    last_time: dict = {}
    values: dict = {}  # (key, value) -> index of the op that wrote it

    def bad(event, what):
        found.append(f"event {event.get('index')}: {what}: {json.dumps(event)[:300]}")

    for position, event in enumerate(history):
        if event.get("index") != position:
            bad(event, f"index should be {position}")
        for field in ("time", "process", "type", "f"):
            if field not in event:
                bad(event, f"missing {field}")
        if not isinstance(event.get("time"), int) or event["time"] < 0:
            bad(event, "time must be a non-negative integer (ns)")
        process, kind, f = event.get("process"), event.get("type"), event.get("f")
        if kind not in COMPLETIONS | {"invoke"}:
            bad(event, f"unknown type {kind!r}")
        if process == "nemesis":
            if "value" not in event:
                bad(event, "nemesis event without value")
            continue
        if not isinstance(process, int):
            bad(event, "process must be an integer or 'nemesis'")
            continue
        if f not in CLIENT_FS:
            bad(event, f"unknown client f {f!r}")
        if process in last_time and event["time"] < last_time[process]:
            bad(event, "time went backwards for this process")
        last_time[process] = event["time"]
        if process in crashed:
            bad(event, "process continued after an info completion")
        if kind == "invoke":
            if process in pending:
                bad(event, f"process has two ops in flight (also {pending[process]['index']})")
            pending[process] = event
            for mop in event.get("mops") or ():
                if mop.get("f") == "send" and event.get("resend"):
                    if (mop.get("key"), mop.get("value")) not in values:  # a resend repeats an old write
                        bad(event, f"resend of value {mop.get('value')} to key {mop.get('key')}, never sent before")
                elif mop.get("f") == "send":
                    check_send_value(event, mop, keys, values, bad)
        else:
            invoked = pending.pop(process, None)
            if invoked is None:
                bad(event, "completion without an invoke")
                continue
            if invoked["f"] != f:
                bad(event, f"completion f {f} does not match invoke f {invoked['f']}")
            if kind == "info":
                crashed.add(process)
                successor = process + concurrency
                if successor in last_time:
                    bad(event, "successor process id already used")
            if kind in ("fail", "info") and "error" not in event:
                bad(event, "fail/info completion without error")
            check_completion(invoked, event, keys, values, bad)
    if not cut_short:
        for invoked in pending.values():
            bad(invoked, "invoke without completion")
    for key in test["keys"].values():
        if not (isinstance(key, list) and len(key) == 2 and isinstance(key[1], int)):
            found.append(f"test.json key entry {key!r} is not [topic, partition]")
    return found


def unrepeated_sends(history: list[dict]) -> list[str]:
    """Completions that do not list every send of their invoke, whatever their
    type (docs/HISTORY.md: a completion repeats the invoke's sends, also for
    `fail` and `info`)."""
    pending: dict = {}
    found = []
    for event in history:
        process = event.get("process")
        if process == "nemesis":
            continue
        if event.get("type") == "invoke":
            pending[process] = event
            continue
        invoked = pending.pop(process, None)
        if invoked is None:
            continue
        want = [(m["key"], m["value"]) for m in invoked.get("mops") or () if m.get("f") == "send"]
        have = {(m.get("key"), m.get("value")) for m in event.get("mops") or () if m.get("f") == "send"}
        missing = [s for s in want if s not in have]
        if missing:
            found.append(
                f"event {event.get('index')} ({event.get('type')} {event.get('f')} "
                f"{event.get('error')}): invoke {invoked.get('index')} sent {missing}, not listed"
            )
    return found


def check_send_value(event, mop, keys, values, bad) -> None:
    key, value = mop.get("key"), mop.get("value")
    if key not in keys:
        bad(event, f"send to key {key!r} not in test.json")
    if not isinstance(value, int):
        bad(event, f"send value {value!r} is not an integer")
    if (key, value) in values:
        bad(event, f"value {value} sent twice to key {key} (first at {values[(key, value)]})")
    values[(key, value)] = event["index"]


def check_completion(invoked, event, keys, values, bad) -> None:
    f = event["f"]
    mops = event.get("mops")
    if f in ("send", "poll", "txn", "commit") and mops is None:
        bad(event, "completion without mops")
        return
    if f in ("assign", "subscribe"):
        if event.get("keys") != invoked.get("keys"):
            bad(event, "assign/subscribe completion does not repeat keys")
        return
    if f == "init":
        if "txn_id" not in event:
            bad(event, "init without txn_id")
        if event["type"] == "ok" and "epoch" in event:
            if not isinstance(event["epoch"], int) or not isinstance(event.get("producer_id"), int):
                bad(event, "init epoch/producer_id must be integers")
        return
    invoked_sends = [(m["key"], m["value"]) for m in invoked.get("mops") or () if m["f"] == "send"]
    done_sends = [(m["key"], m["value"]) for m in mops if m["f"] == "send"]
    if [s for s in done_sends if s in set(invoked_sends)] != invoked_sends:
        bad(event, "completion does not repeat the invoke's sends in order")
    for mop in mops:
        kind = mop.get("f")
        if kind == "send":
            if (mop["key"], mop["value"]) not in set(invoked_sends):
                check_send_value(event, mop, keys, values, bad)  # decided during the op
                if "from" in mop and not (isinstance(mop["from"], list) and len(mop["from"]) == 2):
                    bad(event, "from must be [key, value]")
            offset = mop.get("offset")
            if offset is not None and (not isinstance(offset, int) or offset < 0):
                bad(event, f"bad send offset {offset!r}")
        elif kind == "poll":
            if not all(isinstance(mop.get(n), int) for n in ("key", "offset", "value")):
                bad(event, "poll mop without integer key, offset and value")
            elif mop["key"] not in keys:
                bad(event, f"poll of key {mop['key']} not in test.json")
        elif kind == "commit":
            if not all(isinstance(mop.get(n), int) for n in ("key", "offset")):
                bad(event, "commit mop without integer key and offset")
            if "group" not in event:
                bad(event, "commit without group")
        else:
            bad(event, f"unknown mop {kind!r}")
    if f == "txn" and "txn_id" not in event:
        bad(event, "txn op without txn_id")
    if f == "commit" and "group" not in event:
        bad(event, "commit op without group")
    for entry in event.get("rebalance") or ():
        if entry.get("type") not in ("assigned", "revoked") or not isinstance(entry.get("keys"), list):
            bad(event, f"bad rebalance entry {entry!r}")
