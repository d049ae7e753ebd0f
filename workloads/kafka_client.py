"""The Kafka client library of a client process: librdkafka (the default) or Kafka's Java client.

The workloads build producers and consumers here and catch the errors named
here, never confluent-kafka's directly, so the same workload code runs on
either library (`gregor run --client librdkafka|java`). Each client process
chooses its library once, before its workload builds anything (`use`).

The types are confluent-kafka's own: KafkaError, KafkaException and
TopicPartition are what librdkafka raises and takes, and the Java client's
are subclasses of them (workloads/java_client/kafka_types.py), so
`except KafkaException` and the `KafkaError.<NAME>` codes hold on both.
With librdkafka, Producer and Consumer are confluent-kafka's, unchanged.
"""

from __future__ import annotations

from typing import Callable

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

__all__ = [
    "CLIENTS",
    "JAVA",
    "LIBRDKAFKA",
    "OFFSET_BEGINNING",
    "Consumer",
    "KafkaError",
    "KafkaException",
    "Producer",
    "TopicPartition",
    "library",
    "librdkafka_version",
    "producer_ids",
    "release",
    "use",
]

LIBRDKAFKA, JAVA = "librdkafka", "java"
CLIENTS = (LIBRDKAFKA, JAVA)


class _Choice:
    library = LIBRDKAFKA


_chosen = _Choice()


def use(name: str, version: str | None = None, on_jvm: Callable[[int], None] | None = None) -> None:
    """This process's library from now on. `version`: the Java client's (None: the newest);
    `on_jvm`: told the pid of each JVM the Java client starts (the pool registers it)."""
    if name not in CLIENTS:
        raise ValueError(f"unknown client {name!r}; the clients are {', '.join(CLIENTS)}")
    if name == JAVA:
        from workloads.java_client import jvm

        jvm.configure(version, on_jvm)
    _chosen.library = name


def library() -> str:
    return _chosen.library


def release() -> None:
    """Ends what the library runs beside this process (the Java client's JVM), at its exit."""
    if _chosen.library == JAVA:
        from workloads.java_client import jvm

        jvm.stop()


def librdkafka_version() -> str:
    return confluent_kafka.libversion()[0]


def Producer(conf: dict, **kwargs):  # noqa: N802 - it stands where confluent-kafka's class stood
    """A producer of this process's library."""
    if _chosen.library == JAVA:
        from workloads.java_client.facade import Producer as JavaProducer

        return JavaProducer(conf, **kwargs)
    return confluent_kafka.Producer(conf, **kwargs)


def Consumer(conf: dict, **kwargs):  # noqa: N802 - it stands where confluent-kafka's class stood
    """A consumer of this process's library."""
    if _chosen.library == JAVA:
        from workloads.java_client.facade import Consumer as JavaConsumer

        return JavaConsumer(conf, **kwargs)
    return confluent_kafka.Consumer(conf, **kwargs)


def producer_ids(producer) -> tuple[int, int] | None:
    """(producer id, epoch) the producer holds right now, where its library can say at once:
    the Java client's transaction manager, read by the driver. librdkafka tells them only in
    its statistics, every statistics.interval.ms (workloads/kafka_io.py StatsWatch): None."""
    if _chosen.library != JAVA:
        return None
    try:
        found = producer.ids()
    except KafkaException:  # the JVM is gone: nothing known
        return None
    if found.get("producer_id", -1) < 0:
        return None
    return int(found["producer_id"]), int(found["producer_epoch"])
