"""Which transaction protocol the brokers saw, read from their transaction log.

The coordinator persists every transactional id's state in
__transaction_state. A 4.x broker that knows transaction.version 2 writes
each record with the client's transaction version (TransactionLogValue's
clientTransactionVersion): 2 for a client speaking protocol v2 (KIP-890,
Kafka's Java client 4.x on brokers with transaction.version=2); the field is
absent for a classic client, and a 3.x broker writes no such field at all.
So the durable answer per transactional id is there, whatever the client
claims.

Kafka's own DumpLogSegments decodes it (--transaction-log-decoder), run on
each node with the node's Kafka install (dump_tool.py). Every node holds replicas
of the partitions, so the records repeat; sets absorb that.
"""

from __future__ import annotations

import json
import re

from harness.systems.kafka import dump_tool

SOURCE = "the brokers' transaction log (__transaction_state, decoded by Kafka's DumpLogSegments)"
_TXN_ID = re.compile(r'"transactionalId":"((?:[^"\\]|\\.)*)"|transactionalId=(\S+)')  # 4.x JSON, 3.x text
_CLIENT_VERSION = re.compile(r'"clientTransactionVersion":(\d+)')
_EPOCH = re.compile(r'"producerEpoch":(-?\d+)|producerEpoch:(-?\d+)')


def parse_dump(text: str, prefix: str = "") -> dict[str, dict]:
    """Per transactional id starting with `prefix`: the client transaction versions
    its records carry (none: classic) and the producer epochs they name."""
    found: dict[str, dict] = {}
    for line in text.splitlines():
        if not line.startswith("| offset:") or "payload:" not in line:
            continue
        key, _, payload = line.partition("payload:")
        named = _TXN_ID.search(key)
        if not named:
            continue
        txn_id = json.loads(f'"{named.group(1)}"') if named.group(1) is not None else named.group(2)
        if not txn_id.startswith(prefix):
            continue
        entry = found.setdefault(txn_id, {"versions": set(), "epochs": set()})
        version = _CLIENT_VERSION.search(payload)
        if version:
            entry["versions"].add(int(version.group(1)))
        epoch = _EPOCH.search(payload)
        if epoch:
            entry["epochs"].add(int(epoch.group(1) or epoch.group(2)))
    return {
        txn_id: {
            "client_transaction_versions": sorted(e["versions"]),
            "protocol": 2 if any(v >= 2 for v in e["versions"]) else 1,
            "epochs": [min(e["epochs"]), max(e["epochs"])] if e["epochs"] else [],
        }
        for txn_id, e in sorted(found.items())
    }


def merge(parts: list[dict[str, dict]]) -> dict[str, dict]:
    """The per-id findings of several nodes as one."""
    merged: dict[str, dict] = {}
    for part in parts:
        for txn_id, entry in part.items():
            have = merged.setdefault(txn_id, dict(entry))
            if have is entry or have == entry:
                continue
            have["client_transaction_versions"] = sorted(
                set(have["client_transaction_versions"]) | set(entry["client_transaction_versions"])
            )
            have["protocol"] = max(have["protocol"], entry["protocol"])
            epochs = have["epochs"] + entry["epochs"]
            have["epochs"] = [min(epochs), max(epochs)] if epochs else []
    return merged


def summary(per_id: dict[str, dict]) -> dict:
    """test.json's "transaction_protocol": the protocol every transactional id of the run used."""
    counts = {"v2": sum(1 for e in per_id.values() if e["protocol"] == 2)}
    counts["classic"] = len(per_id) - counts["v2"]
    if not per_id:
        protocol = "none"  # no transaction of the run reached the log
    elif counts["v2"] and counts["classic"]:
        protocol = "mixed"
    else:
        protocol = "v2" if counts["v2"] else "classic"
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
    return summary(merge(parts))
