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
import itertools
import socket
import struct

from harness.errors import GregorError
from harness.systems import secure_link

FIND_COORDINATOR = 10
DESCRIBE_QUORUM = 55
CLIENT_ID = b"gregor"
_correlation = itertools.count(1)


class KafkaProtocolError(GregorError):
    """The broker answered with a Kafka error code."""

    def __init__(self, code: int, what: str):
        super().__init__(f"{what}: Kafka error code {code}")
        self.code = code


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(buf: io.BytesIO) -> int:
    shift = result = 0
    while True:
        byte = buf.read(1)[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7


def _read(buf: io.BytesIO, fmt: str):
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, buf.read(size))[0]


def _string(buf: io.BytesIO) -> str | None:
    length = _read(buf, ">h")
    return None if length < 0 else buf.read(length).decode()


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
        return _request(sock, host, port, api_key, version, body, flexible, flexible_response)


def _request(
    sock,
    host: str,
    port: int,
    api_key: int,
    version: int,
    body: bytes,
    flexible: bool,
    flexible_response: bool | None = None,
) -> io.BytesIO:
    correlation = next(_correlation) & 0x7FFFFFFF
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    if flexible:
        header += b"\x00"  # no tagged fields
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    data = io.BytesIO(_recv_exact(sock, size))
    if _read(data, ">i") != correlation:
        raise GregorError(f"{host}:{port} answered a different request")
    if flexible if flexible_response is None else flexible_response:
        _read_uvarint(data)  # response header tagged fields
    return data


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def active_controller(host: str, port: int, timeout: float = 5, security: dict | None = None) -> int:
    """The node id of the Raft leader of __cluster_metadata (DescribeQuorum v0)."""
    topic = b"__cluster_metadata"
    body = (
        _uvarint(2)
        + _uvarint(len(topic) + 1)
        + topic
        + _uvarint(2)
        + struct.pack(">i", 0)
        + b"\x00"  # partition 0, no tags
        + b"\x00"
        + b"\x00"
    )  # topic tags, request tags
    data = _exchange(host, port, DESCRIBE_QUORUM, 0, body, flexible=True, timeout=timeout, security=security)
    error = _read(data, ">h")
    if error:
        raise KafkaProtocolError(error, "DescribeQuorum")
    if _read_uvarint(data) - 1 < 1:
        raise GregorError("DescribeQuorum returned no topic")
    data.read(_read_uvarint(data) - 1)  # topic name
    if _read_uvarint(data) - 1 < 1:
        raise GregorError("DescribeQuorum returned no partition")
    _read(data, ">i")  # partition index
    error = _read(data, ">h")
    if error:
        raise KafkaProtocolError(error, "DescribeQuorum partition")
    return _read(data, ">i")


def find_coordinator(
    host: str, port: int, key: str, key_type: int, timeout: float = 5, security: dict | None = None
) -> int:
    """The broker id coordinating a group (key_type 0) or transactional id (1)."""
    raw = key.encode()
    body = struct.pack(">h", len(raw)) + raw + struct.pack(">b", key_type)
    data = _exchange(host, port, FIND_COORDINATOR, 1, body, flexible=False, timeout=timeout, security=security)
    _read(data, ">i")  # throttle time
    error = _read(data, ">h")
    message = _string(data)
    if error:
        raise KafkaProtocolError(error, f"FindCoordinator({key!r}) {message or ''}".strip())
    return _read(data, ">i")


METADATA = 3


def _int32_array(buf: io.BytesIO) -> list[int]:
    count = _read(buf, ">i")
    return [_read(buf, ">i") for _ in range(max(count, 0))]


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
    _read(data, ">i")  # throttle time
    brokers = {}
    for _ in range(_read(data, ">i")):
        broker_id, broker_host, broker_port, _rack = _read(data, ">i"), _string(data), _read(data, ">i"), _string(data)
        brokers[broker_id] = [broker_host, broker_port]
    cluster_id = _string(data)
    controller_id = _read(data, ">i")  # a random broker under KRaft; kfake's own controller broker
    result: dict[str, dict] = {}
    for _ in range(_read(data, ">i")):
        error = _read(data, ">h")
        name = _string(data)
        _read(data, ">b")  # is_internal
        partitions = {}
        for _ in range(_read(data, ">i")):
            _read(data, ">h")  # partition error
            index = _read(data, ">i")
            leader = _read(data, ">i")
            replicas = _int32_array(data)
            isr = _int32_array(data)
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

# The Kafka protocol's names for the API keys Gregor's clients and checks use.
API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    36: "SaslAuthenticate",
    55: "DescribeQuorum",
    57: "UpdateFeatures",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
}


def api_name(key: int) -> str:
    return f"{API_NAMES.get(key, 'API')} (API key {key})"


def _compact_string(buf: io.BytesIO) -> str | None:
    length = _read_uvarint(buf) - 1
    return None if length < 0 else buf.read(length).decode()


def _skip_tags(buf: io.BytesIO) -> None:
    for _ in range(_read_uvarint(buf)):
        _read_uvarint(buf)
        buf.read(_read_uvarint(buf))


def _features(raw: bytes, finalized: bool) -> dict[str, list[int]]:
    """A tagged features array: name -> [min, max] (finalized ones carry max first)."""
    buf = io.BytesIO(raw)
    result = {}
    for _ in range(_read_uvarint(buf) - 1):
        name = _compact_string(buf)
        first, second = _read(buf, ">h"), _read(buf, ">h")
        _skip_tags(buf)
        result[name] = [second, first] if finalized else [first, second]
    return result


def api_versions(host: str, port: int, timeout: float = 5, security: dict | None = None) -> dict:
    """What one broker says it serves (ApiVersions v3, else v0).

    {"apis": {key: [min, max]}, "supported_features": {name: [min, max]},
    "finalized_features": {name: [min, max]}, "request_version": 3 or 0}.
    A broker that predates v3 answers UNSUPPORTED_VERSION with its v0 list.
    """
    name, version = b"gregor", b"1"
    body = _uvarint(len(name) + 1) + name + _uvarint(len(version) + 1) + version + b"\x00"
    data = _exchange(
        host, port, API_VERSIONS, 3, body, flexible=True, timeout=timeout, flexible_response=False, security=security
    )
    error = _read(data, ">h")
    if error == UNSUPPORTED_VERSION:
        data = _exchange(host, port, API_VERSIONS, 0, b"", flexible=False, timeout=timeout, security=security)
        error = _read(data, ">h")
        if error:
            raise KafkaProtocolError(error, "ApiVersions v0")
        apis = {}
        for _ in range(_read(data, ">i")):
            key, low, high = _read(data, ">h"), _read(data, ">h"), _read(data, ">h")
            apis[key] = [low, high]
        return {"apis": apis, "supported_features": {}, "finalized_features": {}, "request_version": 0}
    if error:
        raise KafkaProtocolError(error, "ApiVersions")
    apis = {}
    for _ in range(_read_uvarint(data) - 1):
        key, low, high = _read(data, ">h"), _read(data, ">h"), _read(data, ">h")
        _skip_tags(data)
        apis[key] = [low, high]
    _read(data, ">i")  # throttle time
    result = {"apis": apis, "supported_features": {}, "finalized_features": {}, "request_version": 3}
    for _ in range(_read_uvarint(data)):
        tag, size = _read_uvarint(data), _read_uvarint(data)
        raw = data.read(size)
        if tag == 0:
            result["supported_features"] = _features(raw, finalized=False)
        elif tag == 2:
            result["finalized_features"] = _features(raw, finalized=True)
    return result
