"""Which transaction protocol the brokers saw, read from their transaction log.

The coordinator persists every transactional id's state in
__transaction_state, and Kafka's own DumpLogSegments decodes it
(--transaction-log-decoder), run on each node with the node's Kafka install
(dump_tool.py). Two things in it tell the protocols apart:

- the epoch at a commit: protocol v2 bumps the producer epoch at every
  EndTxn, so a PrepareCommit record names an epoch above the id's record
  before it (in the same segment file); the classic protocol never bumps
  at a commit. This answers first, with either decoder;
- where an id has no such commit, the client's transaction version
  (TransactionLogValue's clientTransactionVersion) on the records its own
  requests made the coordinator write (Ongoing, PrepareCommit): 2 for a
  client speaking protocol v2 (KIP-890), absent for a classic one. Only the
  JSON decoder of the kafka-tools jar (4.3.0 on) prints it; the text
  decoder of kafka_2.13 (3.x up to 4.2.x) prints no such field, even where
  the broker stored it (4.0.2, measured).

The field alone is not trusted: on 4.3.1 and 4.4.0 brokers with
transaction.version 2, ids of librdkafka (classic only) had a 2 on some
record under faults, while none of their hundreds of commits bumped the
epoch (measured 2026-11-29). An id that committed nothing under the text
decoder is `unknown`, never assumed classic. Every node holds replicas of
the partitions, so the records repeat: counts are per node, and nodes
merge by maximum.
"""

from __future__ import annotations

import json
import re

from harness.systems.kafka import dump_tool, install

V2_FROM = (4, 0, 0)  # the first Kafka with transaction.version 2 (KIP-890 part 2)
SOURCE = "the brokers' transaction log (__transaction_state, decoded by Kafka's DumpLogSegments)"
_TXN_ID = re.compile(r'"transactionalId":"((?:[^"\\]|\\.)*)"|transactionalId=(\S+)')  # 4.3+ JSON, older text
_CLIENT_VERSION = re.compile(r'"clientTransactionVersion":(\d+)')
_EPOCH = re.compile(r'"producerEpoch":(-?\d+)|producerEpoch:(-?\d+)')
_STATUS = re.compile(r'"transactionStatus":(?:(\d+)|"(\w+)")|state=(\w+),')
_STATUS_NAMES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"]
_CLIENTS_OWN = ("Ongoing", "PrepareCommit")  # written on the client's AddPartitions and EndTxn(commit)


def parse_dump(text: str, prefix: str = "") -> dict[str, dict]:
    """Per transactional id starting with `prefix`: the client transaction versions its
    Ongoing and PrepareCommit records carry, the producer epochs its records name, its commits and the commits that
    bumped the epoch, and the protocol these show (1, 2, or None: cannot tell)."""
    found: dict[str, dict] = {}
    last_epoch: dict[str, int] = {}  # per segment file: log order holds only within one
    for line in text.splitlines():
        if line.startswith("Dumping "):
            last_epoch.clear()
            continue
        if not line.startswith("| offset:") or "payload:" not in line:
            continue
        key, _, payload = line.partition("payload:")
        named = _TXN_ID.search(key)
        if not named:
            continue
        txn_id = json.loads(f'"{named.group(1)}"') if named.group(1) is not None else named.group(2)
        if not txn_id.startswith(prefix):
            continue
        entry = found.setdefault(
            txn_id, {"versions": set(), "epochs": set(), "json": False, "commits": 0, "commit_bumps": 0}
        )
        entry["json"] = entry["json"] or named.group(1) is not None
        state = _status(payload)
        version = _CLIENT_VERSION.search(payload)
        if version and state in _CLIENTS_OWN:
            entry["versions"].add(int(version.group(1)))
        epoch = _EPOCH.search(payload)
        if not epoch:
            continue
        value = int(epoch.group(1) or epoch.group(2))
        entry["epochs"].add(value)
        if state == "PrepareCommit" and txn_id in last_epoch:  # a commit whose epoch can be compared
            entry["commits"] += 1
            if value > last_epoch[txn_id]:
                entry["commit_bumps"] += 1
        last_epoch[txn_id] = value
    return {txn_id: _entry(e) for txn_id, e in sorted(found.items())}


def _status(payload: str) -> str | None:
    """The record's transaction state by name: the JSON decoder prints a number or a
    name, the text decoder a name."""
    found = _STATUS.search(payload)
    if not found:
        return None
    number, name, text = found.groups()
    if number is not None:
        return _STATUS_NAMES[int(number)] if int(number) < len(_STATUS_NAMES) else number
    return name or text


def _entry(e: dict) -> dict:
    return _finding(e["versions"], e["epochs"], e["commits"], e["commit_bumps"], e["json"])


def _finding(versions, epochs, commits: int, bumps: int, printed: bool) -> dict:
    """One id's entry of test.json's per_id, its protocol derived from the rest."""
    versions = sorted(versions)
    return {
        "client_transaction_versions": versions,
        "epochs": [min(epochs), max(epochs)] if epochs else [],
        "commits": commits,
        "commit_bumps": bumps,
        "printed_version": printed,
        "protocol": _protocol(versions, printed, commits, bumps),
    }


def _protocol(versions: list[int], printed: bool, commits: int, bumps: int) -> int | None:
    """2, 1, or None where the log cannot tell (see the module's docstring). The commits
    answer first: a v2 commit always bumps the epoch, whichever decoder printed it."""
    if bumps:
        return 2
    if commits:
        return 1
    if any(v >= 2 for v in versions):
        return 2
    return 1 if printed else None


def merge(parts: list[dict[str, dict]]) -> dict[str, dict]:
    """The per-id findings of several nodes (replicas of the same records) as one."""
    merged: dict[str, dict] = {}
    for part in parts:
        for txn_id, entry in part.items():
            have = merged.get(txn_id)
            if have is None:
                merged[txn_id] = dict(entry)
                continue
            merged[txn_id] = _finding(
                set(have["client_transaction_versions"]) | set(entry["client_transaction_versions"]),
                have["epochs"] + entry["epochs"],
                max(have["commits"], entry["commits"]),
                max(have["commit_bumps"], entry["commit_bumps"]),
                have["printed_version"] or entry["printed_version"],
            )
    return merged


def summary(per_id: dict[str, dict]) -> dict:
    """test.json's "transaction_protocol": the protocol every transactional id of the run used."""
    counts = {
        "v2": sum(1 for e in per_id.values() if e["protocol"] == 2),
        "classic": sum(1 for e in per_id.values() if e["protocol"] == 1),
        "unknown": sum(1 for e in per_id.values() if e["protocol"] is None),
    }
    told = [name for name in ("v2", "classic") if counts[name]]
    if not per_id:
        protocol = "none"  # no transaction of the run reached the log
    elif len(told) == 2:
        protocol = "mixed"
    elif told:
        protocol = told[0]
    else:
        protocol = "unknown"  # no id committed, and this decoder prints no client version
    return {"source": SOURCE, "protocol": protocol, "transactional_ids": counts, "per_id": per_id}


def dump_node(system, node) -> str:
    """DumpLogSegments' decoding of the node's __transaction_state segments ("" when it has none)."""
    files = dump_tool.log_files(system, node, ["__transaction_state-*"])
    return dump_tool.run(system, node, files, ["--transaction-log-decoder"])


def read(system, lab, prefix: str) -> dict:
    """The transaction protocol of every transactional id starting with `prefix` (a run's),
    as the brokers recorded it; {"source", "error"} when the log cannot be read."""
    try:
        brokers = [lab.node(name) for name in system.broker_nodes_names()]
        parts = [parse_dump(dump_node(system, node), prefix) for node in brokers]
    except Exception as error:  # never cost the run its history: say why it is missing
        return {"source": SOURCE, "error": str(error).splitlines()[0][:300] if str(error) else type(error).__name__}
    merged = merge(parts)
    return summary(classic_only(merged) if install.version_key(system.version) < V2_FROM else merged)


def classic_only(per_id: dict[str, dict]) -> dict[str, dict]:
    """A broker older than 4.0 has no protocol v2: an id its log cannot place is classic."""
    return {txn_id: {**e, "protocol": e["protocol"] or 1} for txn_id, e in per_id.items()}
