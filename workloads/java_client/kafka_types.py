"""confluent-kafka's value types, as the Java facade hands them to workload code.

Each is a subclass of confluent-kafka's own type, so that the workloads'
`except KafkaException`, `isinstance(err, KafkaError)` and the
`KafkaError.<NAME>` codes hold on both clients. What the subclasses add: a
KafkaError named after a Java exception that librdkafka has no code for (and
the driver's report of the exception, `java`), a TopicPartition whose
`error` can be set, and a Message built from the driver's record.
"""

from __future__ import annotations

import confluent_kafka

OFFSET_BEGINNING = confluent_kafka.OFFSET_BEGINNING
OFFSET_END = confluent_kafka.OFFSET_END
OFFSET_STORED = confluent_kafka.OFFSET_STORED
OFFSET_INVALID = confluent_kafka.OFFSET_INVALID
TIMESTAMP_CREATE_TIME = confluent_kafka.TIMESTAMP_CREATE_TIME
TIMESTAMP_NOT_AVAILABLE = confluent_kafka.TIMESTAMP_NOT_AVAILABLE


def code_of(name: str) -> int | None:
    """librdkafka's code of an error name (`PRODUCER_FENCED` -> 90), or None."""
    code = getattr(confluent_kafka.KafkaError, name, None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def name_of(code: int) -> str:
    """librdkafka's name of an error code (a Kafka protocol code or one of librdkafka's own)."""
    return confluent_kafka.KafkaError(code).name()


class KafkaError(confluent_kafka.KafkaError):
    """An error with librdkafka's code and name, from a Java exception."""

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
        *,
        name: str | None = None,
        java: dict | None = None,
    ):
        super().__init__(error, reason, fatal, retriable, txn_requires_abort)
        self._java_name = name
        self.java = java  # the driver's report: the exception chain, where it surfaced, the producer's state

    def name(self) -> str:
        return self._java_name or super().name()

    def __str__(self) -> str:
        return f'KafkaError{{code={self.name()},val={self.code()},str="{self.str()}"}}'

    __repr__ = __str__


class KafkaException(confluent_kafka.KafkaException):
    """Raised by a failed call; args[0] is the KafkaError."""


class TopicPartition(confluent_kafka.TopicPartition):
    """A partition (and offset) the driver reported, with the error it reported for it."""

    error = None  # set per instance (confluent-kafka's own is read-only)


class Message:
    """A consumed record, or the subject of a delivery report."""

    def __init__(self, topic, partition, offset, key, value, error=None, timestamp=None):
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._error = key, value, error
        self._timestamp = timestamp

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def error(self):
        return self._error

    def timestamp(self):
        if self._timestamp is None:
            return TIMESTAMP_NOT_AVAILABLE, -1
        return TIMESTAMP_CREATE_TIME, self._timestamp

    def headers(self):
        return None

    def __len__(self) -> int:
        return len(self._value or b"")
