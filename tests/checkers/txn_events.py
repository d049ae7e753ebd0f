"""Terse builders of hand-written events for the transactional checker tests."""

from __future__ import annotations


def op(process, f, mops=None, type="ok", **fields) -> list[dict]:
    """An invoke and its completion; the invoke repeats sends without offsets and one bare poll."""
    mops = mops or []
    invoke_mops = []
    for mop in mops:
        if mop["f"] == "send":
            invoke_mops.append({"f": "send", "key": mop["key"], "value": mop["value"]})
        elif mop["f"] == "poll":
            if {"f": "poll"} not in invoke_mops:
                invoke_mops.append({"f": "poll"})
        else:
            invoke_mops.append(dict(mop))
    carried = {k: v for k, v in fields.items() if k in ("txn_id", "group", "keys")}
    return [
        {"process": process, "type": "invoke", "f": f, "mops": invoke_mops, **carried},
        {"process": process, "type": type, "f": f, "mops": mops, **fields},
    ]


def send(key, value, offset=None, source=None) -> dict:
    mop = {"f": "send", "key": key, "value": value}
    if offset is not None:
        mop["offset"] = offset
    if source is not None:
        mop["from"] = list(source)
    return mop


def poll(key, offset, value) -> dict:
    return {"f": "poll", "key": key, "offset": offset, "value": value}


def commit(key, offset) -> dict:
    return {"f": "commit", "key": key, "offset": offset}


def flatten(*groups) -> list[dict]:
    events = []
    for group in groups:
        events.extend(group if isinstance(group, list) else [group])
    return events
