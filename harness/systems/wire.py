"""Kafka protocol requests the Python client lacks, spoken directly.

confluent-kafka's metadata names a random broker as "controller" under KRaft,
cannot look up a transaction coordinator and never asks one broker alone,
so for those questions we send DescribeQuorum (the active controller, the
Raft leader of __cluster_metadata), FindCoordinator and Metadata over a
plain socket. Every Kafka-compatible system answers these the same way.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct

from harness.errors import GregorError

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


def _exchange(host: str, port: int, api_key: int, version: int, body: bytes,
              flexible: bool, timeout: float) -> io.BytesIO:
    correlation = next(_correlation) & 0x7FFFFFFF
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    if flexible:
        header += b"\x00"  # no tagged fields
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        data = io.BytesIO(_recv_exact(sock, size))
    if _read(data, ">i") != correlation:
        raise GregorError(f"{host}:{port} answered a different request")
    if flexible:
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


def active_controller(host: str, port: int, timeout: float = 5) -> int:
    """The node id of the Raft leader of __cluster_metadata (DescribeQuorum v0)."""
    topic = b"__cluster_metadata"
    body = (_uvarint(2) + _uvarint(len(topic) + 1) + topic
            + _uvarint(2) + struct.pack(">i", 0) + b"\x00"  # partition 0, no tags
            + b"\x00" + b"\x00")                              # topic tags, request tags
    data = _exchange(host, port, DESCRIBE_QUORUM, 0, body, flexible=True, timeout=timeout)
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


def find_coordinator(host: str, port: int, key: str, key_type: int, timeout: float = 5) -> int:
    """The broker id coordinating a group (key_type 0) or transactional id (1)."""
    raw = key.encode()
    body = struct.pack(">h", len(raw)) + raw + struct.pack(">b", key_type)
    data = _exchange(host, port, FIND_COORDINATOR, 1, body, flexible=False, timeout=timeout)
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


def cluster_metadata(host: str, port: int, topics: list[str], timeout: float = 5) -> dict:
    """One broker's own view of the cluster and of `topics` (Metadata v4).

    {"brokers": {id: [host, port]}, "cluster_id": str, "topics": {topic:
    {"error": code, "partitions": {pid: {"leader", "replicas", "isr"}}}}}.
    Brokers learn metadata at different moments; asking each one directly is
    how a health check knows that every broker agrees, not just one of them.
    """
    body = struct.pack(">i", len(topics))
    for topic in topics:
        raw = topic.encode()
        body += struct.pack(">h", len(raw)) + raw
    body += struct.pack(">b", 0)  # never auto-create
    data = _exchange(host, port, METADATA, 4, body, flexible=False, timeout=timeout)
    _read(data, ">i")  # throttle time
    brokers = {}
    for _ in range(_read(data, ">i")):
        broker_id, broker_host, broker_port, _rack = _read(data, ">i"), _string(data), _read(data, ">i"), _string(data)
        brokers[broker_id] = [broker_host, broker_port]
    cluster_id = _string(data)
    _read(data, ">i")  # controller id (a random broker under KRaft)
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
    return {"brokers": brokers, "cluster_id": cluster_id, "topics": result}


def metadata(host: str, port: int, topics: list[str], timeout: float = 5) -> dict[str, dict]:
    """{topic: {"error", "partitions"}} of one broker's own view (see cluster_metadata)."""
    return cluster_metadata(host, port, topics, timeout)["topics"]
