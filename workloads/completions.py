"""Completions written on a client's behalf, and the sends an op leaves open.

When a client dies inside an op nobody knows what it did: the controller
records an `info` completion for it. These helpers build such completions
and tell which sends a replacement may send again (--resend).
"""

from __future__ import annotations


def unknown_outcome_mops(invoke_mops: list[dict]) -> list[dict]:
    """The mops of a completion whose client died mid-op: its sends stay
    listed (offset unknown); a bare `{"f": "poll"}` goes, because a completion
    has one poll mop per record read and nothing is known to have been read."""
    return [dict(mop) for mop in invoke_mops if not (mop.get("f") == "poll" and "key" not in mop)]


def info_completion(invoked: dict, why: str, polled: list | None = None, committing: int | None = None) -> dict:
    """The `info` completion the controller records for an op whose client
    was killed or died inside it: nobody knows what it did. The records it
    had received (`polled`) are read (docs/HISTORY.md: a completion's polls
    list the records received before the failure)."""
    event = {"process": invoked["process"], "type": "info", "f": invoked["f"]}
    if "mops" in invoked:
        event["mops"] = unknown_outcome_mops(invoked["mops"]) + list(polled or [])
    for name in ("keys", "txn_id", "group", "resend"):
        if name in invoked:
            event[name] = invoked[name]
    if committing is not None:
        event["commit_time"] = committing
    event["error"] = why
    return event


def left_open_sends(completion: dict | None) -> list[dict]:
    """The sends a replacement may send again (--resend) after its predecessor
    was killed inside this op: all of them, unless the op is a transaction
    that had already asked Kafka to commit (`commit_time`). Such a transaction
    was not left open: the replacement's init_transactions does not abort it,
    it may well have committed, and sending its writes again would make a
    second copy that no transactional guarantee is about."""
    if completion is None or completion.get("commit_time") is not None:
        return []
    return sends_of(completion)


def sends_of(event: dict | None) -> list[dict]:
    """An op's sends as fresh send mops (key and value only), to send again."""
    return [
        {"f": "send", "key": m["key"], "value": m["value"]}
        for m in (event or {}).get("mops") or ()
        if m.get("f") == "send"
    ]


def with_unperformed_sends(done: list[dict], invoke_mops: list[dict]) -> list[dict]:
    """A completion's mops: what the op did, then every send of its invoke it
    never got to (docs/HISTORY.md: a completion repeats its invoke's sends, also
    for `fail` and `info`; a fenced instance's unsent writes are exactly what
    a zombie-write check looks for)."""
    performed = {(m.get("key"), m.get("value")) for m in done if m.get("f") == "send"}
    rest = [dict(m) for m in invoke_mops if m.get("f") == "send" and (m.get("key"), m.get("value")) not in performed]
    return list(done) + rest
