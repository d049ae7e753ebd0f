"""Kafka protocol requests the Python client lacks, spoken directly.

confluent-kafka's metadata names a random broker as "controller" under KRaft,
cannot look up a transaction coordinator, never asks one broker alone and
keeps the broker's ApiVersions answer to itself, so for those questions we
send DescribeQuorum (the active controller, the Raft leader of
__cluster_metadata), FindCoordinator, Metadata and ApiVersions (what a
broker can serve, and its finalized features such as transaction.version)
over a plain socket. Every Kafka-compatible system answers these the same way.
"""

from __future__ import annotations

import io
import struct

from ground.errors import GregorError
from harness.systems import secure_link
from harness.systems.kafka_codec import (
    compact_string,
    int32_array,
    read,
    read_uvarint,
    request,
    skip_tags,
    string,
    uvarint,
)
from harness.wire.frames import API_NAMES  # the Kafka protocol's names for its API keys

FIND_COORDINATOR = 10
DESCRIBE_QUORUM = 55


class KafkaProtocolError(GregorError):
    """The broker answered with a Kafka error code."""

    def __init__(self, code: int, what: str):
        super().__init__(f"{what}: Kafka error code {code}")
        self.code = code


def _exchange(
    host: str,
    port: int,
    api_key: int,
    version: int,
    body: bytes,
    flexible: bool,
    timeout: float,
    flexible_response: bool | None = None,
    security: dict | None = None,
) -> io.BytesIO:
    """One request, one response, on a connection of its own. `flexible_response`
    differs from `flexible` only for ApiVersions, whose response header is
    never flexible. `security`: the clients' librdkafka settings (TLS, SASL)."""
    with secure_link.connect(host, port, timeout, security) as sock:
        return request(sock, host, port, api_key, version, body, flexible, flexible_response)


def active_controller(host: str, port: int, timeout: float = 5, security: dict | None = None) -> int:
    """The node id of the Raft leader of __cluster_metadata (DescribeQuorum v0)."""
    topic = b"__cluster_metadata"
    body = (
        uvarint(2)
        + uvarint(len(topic) + 1)
        + topic
        + uvarint(2)
        + struct.pack(">i", 0)
        + b"\x00"  # partition 0, no tags
        + b"\x00"
        + b"\x00"
    )  # topic tags, request tags
    data = _exchange(host, port, DESCRIBE_QUORUM, 0, body, flexible=True, timeout=timeout, security=security)
    error = read(data, ">h")
    if error:
        raise KafkaProtocolError(error, "DescribeQuorum")
    if read_uvarint(data) - 1 < 1:
        raise GregorError("DescribeQuorum returned no topic")
    data.read(read_uvarint(data) - 1)  # topic name
    if read_uvarint(data) - 1 < 1:
        raise GregorError("DescribeQuorum returned no partition")
    read(data, ">i")  # partition index
    error = read(data, ">h")
    if error:
        raise KafkaProtocolError(error, "DescribeQuorum partition")
    return read(data, ">i")


def find_coordinator(
    host: str, port: int, key: str, key_type: int, timeout: float = 5, security: dict | None = None
) -> int:
    """The broker id coordinating a group (key_type 0) or transactional id (1)."""
    raw = key.encode()
    body = struct.pack(">h", len(raw)) + raw + struct.pack(">b", key_type)
    data = _exchange(host, port, FIND_COORDINATOR, 1, body, flexible=False, timeout=timeout, security=security)
    read(data, ">i")  # throttle time
    error = read(data, ">h")
    message = string(data)
    if error:
        raise KafkaProtocolError(error, f"FindCoordinator({key!r}) {message or ''}".strip())
    return read(data, ">i")


METADATA = 3


def cluster_metadata(host: str, port: int, topics: list[str], timeout: float = 5, security: dict | None = None) -> dict:
    """One broker's own view of the cluster and of `topics` (Metadata v4).

    {"brokers": {id: [host, port]}, "cluster_id": str, "controller_id": int,
    "topics": {topic: {"error": code, "partitions": {pid: {"leader", "replicas", "isr"}}}}}.
    Brokers learn metadata at different moments; asking each one directly is
    how a health check knows that every broker agrees, not just one of them.
    """
    body = struct.pack(">i", len(topics))
    for topic in topics:
        raw = topic.encode()
        body += struct.pack(">h", len(raw)) + raw
    body += struct.pack(">b", 0)  # never auto-create
    data = _exchange(host, port, METADATA, 4, body, flexible=False, timeout=timeout, security=security)
    read(data, ">i")  # throttle time
    brokers = {}
    for _ in range(read(data, ">i")):
        broker_id, broker_host, broker_port, _rack = read(data, ">i"), string(data), read(data, ">i"), string(data)
        brokers[broker_id] = [broker_host, broker_port]
    cluster_id = string(data)
    controller_id = read(data, ">i")  # a random broker under KRaft; kfake's own controller broker
    result: dict[str, dict] = {}
    for _ in range(read(data, ">i")):
        error = read(data, ">h")
        name = string(data)
        read(data, ">b")  # is_internal
        partitions = {}
        for _ in range(read(data, ">i")):
            read(data, ">h")  # partition error
            index = read(data, ">i")
            leader = read(data, ">i")
            replicas = int32_array(data)
            isr = int32_array(data)
            partitions[index] = {"leader": leader, "replicas": replicas, "isr": isr}
        result[name] = {"error": error, "partitions": dict(sorted(partitions.items()))}
    return {"brokers": brokers, "cluster_id": cluster_id, "controller_id": controller_id, "topics": result}


def metadata(
    host: str, port: int, topics: list[str], timeout: float = 5, security: dict | None = None
) -> dict[str, dict]:
    """{topic: {"error", "partitions"}} of one broker's own view (see cluster_metadata)."""
    return cluster_metadata(host, port, topics, timeout, security)["topics"]


API_VERSIONS = 18
UNSUPPORTED_VERSION = 35


def api_name(key: int) -> str:
    return f"{API_NAMES.get(key, 'API')} (API key {key})"


def _features(raw: bytes, finalized: bool) -> dict[str, list[int]]:
    """A tagged features array: name -> [min, max] (finalized ones carry max first)."""
    buf = io.BytesIO(raw)
    result = {}
    for _ in range(read_uvarint(buf) - 1):
        name = compact_string(buf)
        first, second = read(buf, ">h"), read(buf, ">h")
        skip_tags(buf)
        result[name] = [second, first] if finalized else [first, second]
    return result


def api_versions(host: str, port: int, timeout: float = 5, security: dict | None = None) -> dict:
    """What one broker says it serves (ApiVersions v3, else v0).

    {"apis": {key: [min, max]}, "supported_features": {name: [min, max]},
    "finalized_features": {name: [min, max]}, "request_version": 3 or 0}.
    A broker that predates v3 answers UNSUPPORTED_VERSION with its v0 list.
    """
    name, version = b"gregor", b"1"
    body = uvarint(len(name) + 1) + name + uvarint(len(version) + 1) + version + b"\x00"
    data = _exchange(
        host, port, API_VERSIONS, 3, body, flexible=True, timeout=timeout, flexible_response=False, security=security
    )
    error = read(data, ">h")
    if error == UNSUPPORTED_VERSION:
        data = _exchange(host, port, API_VERSIONS, 0, b"", flexible=False, timeout=timeout, security=security)
        error = read(data, ">h")
        if error:
            raise KafkaProtocolError(error, "ApiVersions v0")
        apis = {}
        for _ in range(read(data, ">i")):
            key, low, high = read(data, ">h"), read(data, ">h"), read(data, ">h")
            apis[key] = [low, high]
        return {"apis": apis, "supported_features": {}, "finalized_features": {}, "request_version": 0}
    if error:
        raise KafkaProtocolError(error, "ApiVersions")
    apis = {}
    for _ in range(read_uvarint(data) - 1):
        key, low, high = read(data, ">h"), read(data, ">h"), read(data, ">h")
        skip_tags(data)
        apis[key] = [low, high]
    read(data, ">i")  # throttle time
    result = {"apis": apis, "supported_features": {}, "finalized_features": {}, "request_version": 3}
    for _ in range(read_uvarint(data)):
        tag, size = read_uvarint(data), read_uvarint(data)
        raw = data.read(size)
        if tag == 0:
            result["supported_features"] = _features(raw, finalized=False)
        elif tag == 2:
            result["finalized_features"] = _features(raw, finalized=True)
    return result
