"""What a cluster can serve, asked of its brokers before a run (ApiVersions).

Kafka-compatible systems implement different parts of the protocol (Tansu
0.6.0 has no EndTxn, so no transaction can commit), and librdkafka finds
out only mid-run, as `_UNSUPPORTED_FEATURE` on every commit. So Gregor asks
every bootstrap server itself, keeps what all of them serve, and refuses a
workload whose clients need an API the brokers do not advertise, in one line
that names it. What it learned goes into test.json ("cluster").
"""

from __future__ import annotations

from ground.addresses import split_server
from ground.errors import GregorError
from harness.systems import wire

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
CREATE_TOPICS, INIT_PRODUCER_ID = 19, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28

# What the clients of each part of a workload call (librdkafka's requests).
GREGOR = (METADATA, CREATE_TOPICS)  # topics and health, before the clients
PRODUCER = (PRODUCE, METADATA)
IDEMPOTENT = (INIT_PRODUCER_ID,)
CONSUMER = (FETCH, LIST_OFFSETS, METADATA)
COMMITS = (FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH)
MEMBERSHIP = (FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP)
TRANSACTIONS = (FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN)
TXN_OFFSETS = (ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT)

TRANSACTIONAL_WORKLOADS = ("txn", "zombie", "eos")


def required_apis(workload: str, idempotence: bool = True, subscribe: bool = False) -> list[int]:
    """The API keys the workload's clients (and Gregor's own setup) send."""
    need = [*GREGOR, *PRODUCER, *CONSUMER]
    if workload in ("queue", "group"):
        need += COMMITS
        if idempotence:
            need += IDEMPOTENT
    if workload == "group" or subscribe:
        need += MEMBERSHIP
    if workload in TRANSACTIONAL_WORKLOADS:
        need += TRANSACTIONS
    if workload == "eos" or (workload == "txn" and subscribe):
        need += [*TXN_OFFSETS, *MEMBERSHIP]
    return sorted(set(need))


def probe(bootstrap_servers: str, timeout: float = 5, client_config: dict | None = None) -> dict:
    """Every bootstrap server's own answer: ApiVersions, and Metadata's
    cluster id and brokers. `apis` is what all answering brokers serve
    (the narrowest range of each key); servers that do not answer are listed.
    `client_config`: the clients' security settings (TLS, SASL), if any.
    """
    answers, silent = {}, []
    cluster_ids, brokers = set(), {}
    for server in [s.strip() for s in bootstrap_servers.split(",") if s.strip()]:
        host, port = split_server(server)
        try:
            answers[server] = wire.api_versions(host, port, timeout=timeout, security=client_config)
            meta = wire.cluster_metadata(host, port, [], timeout=timeout, security=client_config)
        except (OSError, GregorError) as error:
            silent.append(f"{server} ({error})")
            continue
        cluster_ids.add(meta["cluster_id"])
        for broker_id, (broker_host, broker_port) in meta["brokers"].items():
            brokers.setdefault(str(broker_id), set()).add(f"{broker_host}:{broker_port}")
    if not answers:
        raise GregorError(f"no bootstrap server answers ApiVersions: {'; '.join(silent)}")
    apis = _narrowest([a["apis"] for a in answers.values()])
    first = next(iter(answers.values()))
    return {
        "bootstrap_servers": bootstrap_servers,
        "cluster_id": sorted(c for c in cluster_ids if c)[0] if any(cluster_ids) else None,
        "brokers": {b: sorted(addresses) for b, addresses in sorted(brokers.items(), key=lambda i: int(i[0]))},
        "api_versions": {str(key): apis[key] for key in sorted(apis)},
        "api_names": {str(key): wire.API_NAMES.get(key, "?") for key in sorted(apis)},
        "supported_features": first["supported_features"],
        "finalized_features": first["finalized_features"],
        "not_answering": silent,
    }


def _narrowest(answers: list[dict]) -> dict[int, list[int]]:
    keys = set.intersection(*(set(int(k) for k in a) for a in answers))
    result = {}
    for key in keys:
        ranges = [a.get(key, a.get(str(key))) for a in answers]
        result[key] = [max(r[0] for r in ranges), min(r[1] for r in ranges)]
    return result


def missing_apis(cluster: dict, workload: str, idempotence: bool = True, subscribe: bool = False) -> list[int]:
    served = {int(key) for key in cluster["api_versions"]}
    return [key for key in required_apis(workload, idempotence, subscribe) if key not in served]


def refuse_unservable(
    cluster: dict, system: str, version: str, workload: str, idempotence: bool = True, subscribe: bool = False
) -> None:
    """One line naming the first API the brokers lack, before any client starts."""
    missing = missing_apis(cluster, workload, idempotence, subscribe)
    if missing:
        names = ", ".join(wire.api_name(key) for key in missing)
        raise GregorError(
            f"{system} {version} cannot serve the {workload} workload: its brokers do not "
            f"advertise {names} in ApiVersions (choose another --workload)"
        )


def feature_level(cluster: dict, feature: str) -> int:
    """A finalized feature's level; 0 when the brokers finalize none (Kafka's meaning of absent)."""
    found = (cluster.get("finalized_features") or {}).get(feature)
    return int(found[1]) if found else 0
