"""Which anomalies the run's configuration permits (docs/ANOMALIES.md, "Permitted or bad").

Permission is by configuration, so it is decided once per anomaly name from
test.json and applies to every instance of that name.
"""

from __future__ import annotations

KAFKA_UNORDERED = "always (Kafka does not order concurrent transactions' writes)"
INTERLEAVED_SENDS = "always (other producers' writes to the partition can land between the records one operation sends)"
G1C_WW = (
    "always (the cycle needs a ww edge, and Kafka places a transaction's writes "
    "in the log when produced, not when committed)"
)

# Not anomalies: rows a finder emits to say something could not be checked.
NOT_CHECKED = {"cycle-search-incomplete"}
# Likewise, but only for families that are always permitted: they cannot change the verdict.
SKIPPED_PERMITTED = "permitted-cycle-search-incomplete"

DESCRIPTIONS = {
    "inconsistent-offsets": "one offset of a partition holds two or more different values",
    "duplicate": "one value stands at two or more offsets of its partition",
    "lost-write": (
        "a write that must have happened, at or below the highest offset any consumer read, that no consumer ever read"
    ),
    "unseen": "a write that must have happened that no consumer read by the end of the run",
    "aborted-read": "a consumer read a value whose write definitely failed or whose transaction aborted",
    "uncommitted-read": "a consumer read a value of another process's transaction before that transaction committed",
    "precommitted-read": "an operation read back a value it wrote itself in the same operation",
    "poll-skip": "a consumer's successive reads of a partition jumped over values",
    "nonmonotonic-poll": "a consumer's later read of a partition went back to or before its earlier read",
    "int-poll-skip": "inside one operation, successive reads of a partition jumped over values",
    "int-nonmonotonic-poll": "inside one operation, a read of a partition went back to or before an earlier one",
    "nonmonotonic-send": "a producer's later acknowledged send to a partition landed at or before its earlier one",
    "int-send-skip": "inside one operation, sends to one partition were not adjacent in the log",
    "int-nonmonotonic-send": "inside one operation, sends to one partition landed out of order",
    "G0": "a cycle of write-write dependencies between operations",
    "G0-process": "a cycle of write-write dependencies and process order",
    "G0-realtime": "a cycle of write-write dependencies, process order and real-time order",
    "G1c": "a cycle of write-read dependencies between operations (no write-write edge needed)",
    "G1c-process": "a cycle of write-read dependencies and process order",
    "G1c-realtime": "a cycle of write-read dependencies, process order and real-time order",
    "G1c-ww": "a cycle of write-read dependencies that needs a write-write edge",
    "G1c-ww-process": "a cycle of write-read and write-write dependencies and process order",
    "G1c-ww-realtime": "a cycle of write-read and write-write dependencies, process order and real-time order",
    "torn-transaction": (
        "a committed transaction of which some writes were read and others never, after a complete drain"
    ),
    "zombie-write": "a transaction of a fenced producer instance committed or was read after a newer instance started",
    "eos-duplicate": "consume-transform-produce wrote two or more outputs for one input record",
    "eos-lost": "consume-transform-produce committed past an input record that produced no output",
    "offset-commit-loss": "a consumer group committed past a record that none of its members read",
    "stuck-lso": "a read_committed consumer kept polling but saw a value only after the transaction timeout",
    "cycle-search-incomplete": (
        "the cycle search skipped a variant because the trimmed graph was too large; not an anomaly"
    ),
    SKIPPED_PERMITTED: (
        "the cycle search skipped always-permitted families (G0, G1c-ww) because the trimmed graph was too large; not "
        "an anomaly"
    ),
}


def config(test: dict) -> dict:
    """The settings that decide permissions, flattened for results.json `config`."""
    client = test.get("client") or {}
    broker = test.get("broker") or {}
    return {
        "acks": client.get("acks", "all"),
        "enable.idempotence": _truthy(client.get("enable.idempotence", True)),
        "isolation.level": client.get("isolation.level", "read_committed"),
        "min.insync.replicas": broker.get("min.insync.replicas"),
        "unclean.leader.election.enable": _truthy(broker.get("unclean.leader.election.enable", False)),
        "auto.commit": _truthy(client.get("auto.commit", client.get("enable.auto.commit", False))),
        "subscribe": _truthy(client.get("subscribe", False)),
        "transactional": _truthy(client.get("transactional", False)),
    }


def drain_complete(test: dict) -> bool:
    """A missing `drain` counts as incomplete (docs/HISTORY.md)."""
    drain = test.get("drain")
    return isinstance(drain, dict) and drain.get("complete") is True


def reads_uncommitted(test: dict) -> bool:
    """Whether the run's consumers read uncommitted records (isolation.level=read_uncommitted)."""
    return str(config(test)["isolation.level"]).lower() == "read_uncommitted"


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _lossy_reasons(cfg: dict) -> list[str]:
    reasons = []
    if str(cfg["acks"]).strip() in ("0", "1"):
        reasons.append(f"acks={cfg['acks']}")
    if cfg["unclean.leader.election.enable"]:
        reasons.append("unclean.leader.election.enable=true")
    if str(cfg["min.insync.replicas"]).strip() == "1":
        reasons.append("min.insync.replicas=1")
    return reasons


def why_allowed(name: str, test: dict) -> str | None:
    """The setting that permits `name` in this run, or None when it is bad."""
    cfg = config(test)
    reasons: list[str] = []
    if name == "duplicate" and not cfg["enable.idempotence"]:
        reasons.append("enable.idempotence=false")
    if name in ("lost-write", "unseen", "inconsistent-offsets"):
        reasons += _lossy_reasons(cfg)
    if name == "unseen" and not drain_complete(test):
        reasons.append("drain incomplete")
    if name in ("aborted-read", "uncommitted-read") and reads_uncommitted(test):
        reasons.append("isolation.level=read_uncommitted")
    if name == "offset-commit-loss" and cfg["auto.commit"]:
        reasons.append("auto.commit=true")
    if name in ("poll-skip", "nonmonotonic-poll") and cfg["subscribe"]:
        reasons.append("subscribe=true (group rebalances move positions)")
    if name in ("G0", "G0-process", "G0-realtime"):
        reasons.append(KAFKA_UNORDERED)
    if name == "int-send-skip":
        reasons.append(INTERLEAVED_SENDS)
    if name in ("G1c-ww", "G1c-ww-process", "G1c-ww-realtime"):
        reasons.append(G1C_WW)
    if name in NOT_CHECKED:
        reasons.append("not an anomaly: a check was skipped (the verdict is at best unknown)")
    if name == SKIPPED_PERMITTED:
        reasons.append(
            "not an anomaly: only families this configuration always permits were skipped, "
            "so the verdict does not depend on them"
        )
    return "; ".join(reasons) if reasons else None


def allowed(name: str, test: dict) -> bool:
    return why_allowed(name, test) is not None


def describe(name: str) -> str:
    return DESCRIPTIONS.get(name, f"{name} (no description)")
