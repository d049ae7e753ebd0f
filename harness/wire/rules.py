"""The wire relay's rules: which requests a fault takes, what it does to them, and what it did.

Why apart: a rule is the fault's whole meaning (nemesis ops in Gregor's history name these fields);
the relay's loop only asks takes() and records what happened.

Actions (the exact meanings are in relay.py's docstring, docs/WIRE.md): delay, hold, drop_response, duplicate.
Limits: api, transactional_id, producer_id, dest, netns (one name or a list), count, after_ms + for_ms (a window).
"""

from __future__ import annotations

import time

from . import frames as kf

ACTIONS = ("delay", "hold", "drop_response", "duplicate")
MAX_EVENTS = 2000  # per rule; beyond, only counted


def wall() -> float:
    return round(time.time(), 6)


class Rule:
    """One fault: which requests it takes, what it does to them, and what it did."""

    FIELDS = (
        "id",
        "action",
        "delay_ms",
        "on",
        "api",
        "transactional_id",
        "producer_id",
        "dest",
        "netns",
        "count",
        "after_ms",
        "for_ms",
    )

    def __init__(self, spec: dict, now: float):
        unknown = set(spec) - set(self.FIELDS)
        if unknown:
            raise ValueError(f"unknown rule field(s) {sorted(unknown)}; known: {', '.join(self.FIELDS)}")
        self.spec = dict(spec)
        self.id = str(spec.get("id") or "")
        self.action = spec.get("action")
        if self.action not in ACTIONS:
            raise ValueError(f"rule action must be one of {', '.join(ACTIONS)}, not {self.action!r}")
        self.on = spec.get("on", "request")
        if self.on not in ("request", "response") or (self.on == "response" and self.action != "delay"):
            raise ValueError('"on": "response" is for delay only; other rules act on the request')
        self.delay = _number(spec, "delay_ms", None) / 1000.0 if "delay_ms" in spec else None
        if self.action in ("delay", "hold") and (self.delay is None or self.delay < 0):
            raise ValueError(f"{self.action} needs delay_ms >= 0")
        self.api = kf.api_key_of(spec["api"]) if spec.get("api") is not None else None
        self.transactional_id = spec.get("transactional_id")
        self.producer_id = int(spec["producer_id"]) if spec.get("producer_id") is not None else None
        self.dest_host, self.dest_port = parse_dest(spec["dest"]) if spec.get("dest") else (None, None)
        # the namespaces whose connections it watches (one client place, or the nodes a broker-source
        # fault aims at), when the relay serves several; None: every one
        netns = spec.get("netns")
        self.netns = None if netns is None else frozenset([netns] if isinstance(netns, str) else netns)
        self.count = int(spec["count"]) if spec.get("count") is not None else None
        self.start = now + _number(spec, "after_ms", 0) / 1000.0
        self.end = self.start + _number(spec, "for_ms", 0) / 1000.0 if spec.get("for_ms") is not None else None
        self.added_at = wall()
        self.matched = 0
        self.events: list[dict] = []
        self.events_dropped = 0

    def takes(self, request: kf.Request, dest: tuple[str, int], netns: str | None, now: float) -> bool:
        if self.count is not None and self.matched >= self.count:
            return False
        if now < self.start or (self.end is not None and now >= self.end):
            return False
        if self.api is not None and request.api_key != self.api:
            return False
        if self.transactional_id is not None and self.transactional_id not in request.transactional_ids:
            return False
        if self.producer_id is not None and self.producer_id not in request.producer_ids:
            return False
        if self.dest_host and dest[0] != self.dest_host:
            return False
        if self.netns is not None and netns not in self.netns:
            return False
        return not (self.dest_port and dest[1] != self.dest_port)

    def record(self, event: dict) -> dict:
        self.matched += 1
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.events_dropped += 1
        return event

    def report(self, now: float) -> dict:
        spent = self.count is not None and self.matched >= self.count
        over = self.end is not None and now >= self.end
        return {
            "rule": self.spec,
            "id": self.id,
            "added_at": self.added_at,
            "matched": self.matched,
            "state": "spent" if spent else "over" if over else "waiting" if now < self.start else "active",
            "events": [dict(event) for event in self.events],
            "events_dropped": self.events_dropped,
        }


def _number(spec: dict, key: str, default):
    value = spec.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"rule field {key} must be a number, not {value!r}") from None


def parse_dest(text: str) -> tuple[str | None, int | None]:
    """ "10.0.0.1:9092", "10.0.0.1" or ":9092"."""
    host, _, port = str(text).rpartition(":") if ":" in str(text) else (str(text), "", "")
    try:
        return host or None, int(port) if port else None
    except ValueError:
        raise ValueError(f"bad destination {text!r}; give HOST:PORT, HOST or :PORT") from None
