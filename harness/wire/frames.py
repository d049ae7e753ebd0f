"""Kafka frames as the wire relay reads them: the header, and the few bodies that name a producer.

Why: a fault aimed at one request must know which request it is (API key,
version, correlation id) and, for the transaction APIs, whose it is
(transactional id, producer id and epoch, and for Produce the record batch's
base sequence). Nothing here rewrites a byte: a frame is parsed, never built.

Standard library only, so it ships to a Kafka node with the rest of harness/wire.

A request header is api key, api version, correlation id and a client id
(an int16-length string in every header version); header v2 (the API's
flexible versions) adds tagged fields. A response header is the correlation
id, plus tagged fields in flexible versions (ApiVersions' response header
never has them, and no body of it is read here).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAX_FRAME = 100 * 1024 * 1024  # the broker's own socket.request.max.bytes default

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
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
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    50: "DescribeUserScramCredentials",
    55: "DescribeQuorum",
    57: "UpdateFeatures",
    60: "DescribeCluster",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    75: "DescribeTopicPartitions",
}
API_KEYS = {name: key for key, name in API_NAMES.items()}

PRODUCE, SASL_HANDSHAKE, API_VERSIONS = 0, 17, 18
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN = 22, 24, 25
END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 26, 27, 28

# The first flexible version of each API whose body is read here (Kafka 3.9 and 4.x agree).
FIRST_FLEXIBLE = {
    PRODUCE: 9,
    INIT_PRODUCER_ID: 2,
    ADD_PARTITIONS_TO_TXN: 3,
    ADD_OFFSETS_TO_TXN: 3,
    END_TXN: 3,
    WRITE_TXN_MARKERS: 1,
    TXN_OFFSET_COMMIT: 3,
    SASL_HANDSHAKE: None,
}
BODY_PARSED = frozenset(FIRST_FLEXIBLE) - {SASL_HANDSHAKE}

# Record batch (magic 2) header offsets, from the start of the batch.
BATCH_LENGTH_AT, MAGIC_AT, ATTRIBUTES_AT, LAST_DELTA_AT = 8, 16, 21, 23
PRODUCER_ID_AT, EPOCH_AT, SEQUENCE_AT, COUNT_AT = 43, 51, 53, 57
BATCH_HEADER = 61
TRANSACTIONAL_BIT, CONTROL_BIT = 0x10, 0x20


class FrameError(ValueError):
    """The bytes are not what this parser expects (truncated or of another protocol)."""


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"api{key}")


def api_key_of(value) -> int:
    """An API given by key or by name ("EndTxn", "endtxn", 26, "26")."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    for name, key in API_KEYS.items():
        if name.lower() == text.lower():
            return key
    raise ValueError(f"unknown Kafka API {value!r}; give its key (e.g. 26) or name (e.g. EndTxn)")


def is_flexible(key: int, version: int) -> bool:
    first = FIRST_FLEXIBLE.get(key)
    return first is not None and version >= first


class Reader:
    """Reads Kafka's primitive types from a buffer, classic or compact (flexible) forms."""

    __slots__ = ("data", "at", "compact")

    def __init__(self, data, at: int = 0, compact: bool = False):
        self.data = data
        self.at = at
        self.compact = compact

    def _take(self, fmt: str, size: int):
        if self.at + size > len(self.data):
            raise FrameError(f"truncated at byte {self.at}")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def int8(self) -> int:
        return self._take(">b", 1)

    def int16(self) -> int:
        return self._take(">h", 2)

    def int32(self) -> int:
        return self._take(">i", 4)

    def int64(self) -> int:
        return self._take(">q", 8)

    def boolean(self) -> bool:
        return self._take(">B", 1) != 0

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(">B", 1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise FrameError("varint too long")

    def _length(self, classic: str) -> int:
        """A string/bytes/array length; -1 means null."""
        if self.compact:
            return self.uvarint() - 1
        return self.int32() if classic == "i" else self.int16()

    def skip(self, count: int) -> None:
        if count < 0 or self.at + count > len(self.data):
            raise FrameError(f"truncated at byte {self.at}")
        self.at += count

    def string(self) -> str | None:
        length = self._length("h")
        if length < 0:
            return None
        start = self.at
        self.skip(length)
        return bytes(self.data[start : self.at]).decode("utf-8", "replace")

    def classic_string(self) -> str | None:
        """An int16-length string whatever the form (the header's client id)."""
        length = self.int16()
        if length < 0:
            return None
        start = self.at
        self.skip(length)
        return bytes(self.data[start : self.at]).decode("utf-8", "replace")

    def bytes_span(self) -> tuple[int, int]:
        """(start, length) of a bytes field (length -1: null), skipped."""
        length = self._length("i")
        start = self.at
        if length > 0:
            self.skip(length)
        return start, length

    def array(self) -> int:
        """An array's element count (null reads as empty)."""
        return max(0, self._length("i"))

    def uuid(self) -> str:
        start = self.at
        self.skip(16)
        return bytes(self.data[start : self.at]).hex()

    def tags(self) -> None:
        """Skips a tagged-field section (flexible versions only)."""
        if not self.compact:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self.skip(self.uvarint())


@dataclass
class Batch:
    """One record batch of a Produce request (or a WriteTxnMarkers marker: no sequence)."""

    topic: str
    partition: int
    producer_id: int
    epoch: int
    base_sequence: int | None = None
    records: int | None = None
    transactional: bool | None = None
    control: bool | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Request:
    """What the relay knows of one request frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int
    transactional_ids: list[str] = field(default_factory=list)
    producers: list[Batch] = field(default_factory=list)
    acks: int | None = None  # Produce only; 0 means the broker sends no response
    details: dict = field(default_factory=dict)  # committed, verify_only, group, ...
    parse_error: str | None = None

    @property
    def expects_response(self) -> bool:
        return not (self.api_key == PRODUCE and self.acks == 0)

    @property
    def producer_ids(self) -> set[int]:
        return {batch.producer_id for batch in self.producers}

    def summary(self) -> dict:
        out = {
            "api": api_name(self.api_key),
            "api_key": self.api_key,
            "version": self.api_version,
            "correlation_id": self.correlation_id,
            "client_id": self.client_id,
        }
        if self.transactional_ids:
            out["transactional_ids"] = list(self.transactional_ids)
        if self.producers:
            out["producers"] = [batch.as_dict() for batch in self.producers]
        if self.acks is not None:
            out["acks"] = self.acks
        if self.details:
            out.update(self.details)
        if self.parse_error:
            out["parse_error"] = self.parse_error
        return out


def frame_size(prefix) -> int:
    """The size field of a frame (the bytes after it); FrameError if no Kafka frame can be that big."""
    (size,) = struct.unpack_from(">i", prefix, 0)
    if size < 4 or size > MAX_FRAME:
        raise FrameError(f"frame size {size} is not Kafka's")
    return size


_HEADER = struct.Struct(">hhih")


def quick_header(frame) -> tuple[int, int, int, bool]:
    """(api key, version, correlation id, whether a response will come), reading as little as it can:
    what the relay needs of every request while no rule could take it. FrameError if unreadable."""
    if len(frame) < 14:
        raise FrameError("truncated request header")
    key, version, correlation, client_length = _HEADER.unpack_from(frame, 4)
    if key != PRODUCE:
        return key, version, correlation, True
    return key, version, correlation, _produce_acks(frame, version, 14 + max(0, client_length)) != 0


def _produce_acks(frame, version: int, at: int) -> int:
    """Produce's acks: after the header's tagged fields (flexible) and the transactional id (v3+)."""
    reader = Reader(frame, at, version >= 9)
    reader.tags()
    if version >= 3:
        reader.string()
    return reader.int16()


def parse_request(frame) -> Request:
    """A whole request frame (size prefix included). Body errors are kept in parse_error, never raised;
    a header that cannot be read raises FrameError."""
    reader = Reader(frame, 4)
    key, version, correlation = reader.int16(), reader.int16(), reader.int32()
    client = None
    if not (key == 7 and version == 0):  # ControlledShutdown v0: the only header v0
        client = reader.classic_string()
    request = Request(key, version, correlation, client, len(frame) - 4)
    if key not in FIRST_FLEXIBLE:
        return request
    reader.compact = is_flexible(key, version)
    try:
        reader.tags()
        BODY_READERS[key](reader, request)
    except FrameError as error:
        request.parse_error = str(error)
    return request


def _read_produce(reader: Reader, request: Request) -> None:
    version = request.api_version
    if version >= 3:
        transactional = reader.string()
        if transactional is not None:
            request.transactional_ids.append(transactional)
    request.acks = reader.int16()
    reader.int32()  # timeout
    for _ in range(reader.array()):
        topic = reader.uuid() if version >= 13 else reader.string()
        for _ in range(reader.array()):
            partition = reader.int32()
            start, length = reader.bytes_span()
            request.producers.extend(record_batches(reader.data, start, length, topic, partition))
            reader.tags()
        reader.tags()


def record_batches(data, start: int, length: int, topic: str, partition: int) -> list[Batch]:
    """The producer fields of each magic-2 batch in a records field (older message sets have none)."""
    batches, at, end = [], start, start + max(0, length)
    while at + BATCH_HEADER <= end:
        (batch_length,) = struct.unpack_from(">i", data, at + BATCH_LENGTH_AT)
        if data[at + MAGIC_AT] != 2 or batch_length < BATCH_HEADER - 12:
            break
        (attributes,) = struct.unpack_from(">h", data, at + ATTRIBUTES_AT)
        producer_id, epoch, sequence, count = struct.unpack_from(">qhii", data, at + PRODUCER_ID_AT)
        batches.append(
            Batch(
                topic,
                partition,
                producer_id,
                epoch,
                sequence,
                count,
                bool(attributes & TRANSACTIONAL_BIT),
                bool(attributes & CONTROL_BIT),
            )
        )
        at += 12 + batch_length
    return batches


def _read_init_producer_id(reader: Reader, request: Request) -> None:
    transactional = reader.string()
    if transactional is not None:
        request.transactional_ids.append(transactional)
    request.details["transaction_timeout_ms"] = reader.int32()
    if request.api_version >= 3:
        producer_id, epoch = reader.int64(), reader.int16()
        if producer_id >= 0:
            request.producers.append(Batch("", -1, producer_id, epoch))


def _read_topics_partitions(reader: Reader) -> list[tuple[str, int]]:
    found = []
    for _ in range(reader.array()):
        topic = reader.string()
        for _ in range(reader.array()):
            found.append((topic, reader.int32()))
        reader.tags()
    return found


def _read_add_partitions(reader: Reader, request: Request) -> None:
    if request.api_version >= 4:  # batched: one entry per transaction (broker-to-broker verification)
        verify = []
        for _ in range(reader.array()):
            transactional = reader.string()
            producer_id, epoch, verify_only = reader.int64(), reader.int16(), reader.boolean()
            request.transactional_ids.append(transactional)
            for topic, partition in _read_topics_partitions(reader):
                request.producers.append(Batch(topic, partition, producer_id, epoch))
            verify.append(verify_only)
            reader.tags()
        request.details["verify_only"] = verify
        return
    transactional = reader.string()
    request.transactional_ids.append(transactional)
    producer_id, epoch = reader.int64(), reader.int16()
    for topic, partition in _read_topics_partitions(reader):
        request.producers.append(Batch(topic, partition, producer_id, epoch))


def _read_add_offsets(reader: Reader, request: Request) -> None:
    request.transactional_ids.append(reader.string())
    producer_id, epoch = reader.int64(), reader.int16()
    request.producers.append(Batch("", -1, producer_id, epoch))
    request.details["group"] = reader.string()


def _read_end_txn(reader: Reader, request: Request) -> None:
    request.transactional_ids.append(reader.string())
    producer_id, epoch = reader.int64(), reader.int16()
    request.producers.append(Batch("", -1, producer_id, epoch))
    request.details["committed"] = reader.boolean()


def _read_txn_offset_commit(reader: Reader, request: Request) -> None:
    request.transactional_ids.append(reader.string())
    request.details["group"] = reader.string()
    producer_id, epoch = reader.int64(), reader.int16()
    request.producers.append(Batch("", -1, producer_id, epoch))


def _read_write_txn_markers(reader: Reader, request: Request) -> None:
    results = []
    for _ in range(reader.array()):
        producer_id, epoch, committed = reader.int64(), reader.int16(), reader.boolean()
        for topic, partition in _read_topics_partitions(reader):
            request.producers.append(Batch(topic, partition, producer_id, epoch))
        reader.int32()  # coordinator epoch
        if request.api_version >= 2:
            reader.int8()  # transaction version
        reader.tags()
        results.append(committed)
    request.details["committed"] = results


def _read_sasl_handshake(reader: Reader, request: Request) -> None:
    request.details["mechanism"] = reader.string()


BODY_READERS = {
    PRODUCE: _read_produce,
    INIT_PRODUCER_ID: _read_init_producer_id,
    ADD_PARTITIONS_TO_TXN: _read_add_partitions,
    ADD_OFFSETS_TO_TXN: _read_add_offsets,
    END_TXN: _read_end_txn,
    TXN_OFFSET_COMMIT: _read_txn_offset_commit,
    WRITE_TXN_MARKERS: _read_write_txn_markers,
    SASL_HANDSHAKE: _read_sasl_handshake,
}


# --- responses ----------------------------------------------------------------


def response_correlation(frame) -> int:
    (correlation,) = struct.unpack_from(">i", frame, 4)
    return correlation


def parse_response(frame, key: int, version: int) -> dict:
    """What a response says that matters to a report: error codes, and Produce's base offsets.
    Responses of other APIs give {}; a body that cannot be read gives {"parse_error": ...}."""
    reader_of = RESPONSE_READERS.get(key)
    if reader_of is None:
        return {}
    reader = Reader(frame, 8, is_flexible(key, version))
    try:
        reader.tags()  # response header v1
        return reader_of(reader, version)
    except FrameError as error:
        return {"parse_error": str(error)}


def _produce_response(reader: Reader, version: int) -> dict:
    partitions = []
    for _ in range(reader.array()):
        topic = reader.uuid() if version >= 13 else reader.string()
        for _ in range(reader.array()):
            entry = {
                "topic": topic,
                "partition": reader.int32(),
                "error": reader.int16(),
                "base_offset": reader.int64(),
            }
            if version >= 2:
                reader.int64()
            if version >= 5:
                entry["log_start_offset"] = reader.int64()
            if version >= 8:
                for _ in range(reader.array()):
                    reader.int32()
                    reader.string()
                message = reader.string()
                if message:
                    entry["message"] = message
            reader.tags()
            partitions.append(entry)
        reader.tags()
    return {"partitions": partitions}


def _error_only(reader: Reader, version: int) -> dict:
    reader.int32()  # throttle
    return {"error": reader.int16()}


def _init_producer_id_response(reader: Reader, version: int) -> dict:
    reader.int32()
    return {"error": reader.int16(), "producer_id": reader.int64(), "epoch": reader.int16()}


def _partition_errors(reader: Reader) -> list[dict]:
    found = []
    for _ in range(reader.array()):
        topic = reader.string()
        for _ in range(reader.array()):
            found.append({"topic": topic, "partition": reader.int32(), "error": reader.int16()})
            reader.tags()
        reader.tags()
    return found


def _add_partitions_response(reader: Reader, version: int) -> dict:
    reader.int32()
    if version < 4:
        return {"partitions": _partition_errors(reader)}
    out = {"error": reader.int16(), "transactions": []}
    for _ in range(reader.array()):
        out["transactions"].append({"transactional_id": reader.string(), "partitions": _partition_errors(reader)})
        reader.tags()
    return out


def _txn_offset_commit_response(reader: Reader, version: int) -> dict:
    reader.int32()
    found = []
    for _ in range(reader.array()):
        topic = reader.uuid() if version >= 6 else reader.string()
        for _ in range(reader.array()):
            found.append({"topic": topic, "partition": reader.int32(), "error": reader.int16()})
            reader.tags()
        reader.tags()
    return {"partitions": found}


def _write_txn_markers_response(reader: Reader, version: int) -> dict:
    markers = []
    for _ in range(reader.array()):
        producer_id = reader.int64()
        markers.append({"producer_id": producer_id, "partitions": _partition_errors(reader)})
        reader.tags()
    return {"markers": markers}


RESPONSE_READERS = {
    PRODUCE: _produce_response,
    INIT_PRODUCER_ID: _init_producer_id_response,
    ADD_PARTITIONS_TO_TXN: _add_partitions_response,
    ADD_OFFSETS_TO_TXN: _error_only,
    END_TXN: _error_only,
    TXN_OFFSET_COMMIT: _txn_offset_commit_response,
    WRITE_TXN_MARKERS: _write_txn_markers_response,
}
