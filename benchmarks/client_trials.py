"""What the client reproductions (benchmarks/librdkafka_*.py) share: a lab to run
their trials on, topics of numbered records, and a one-line error at the end.

Why apart: each script is one finding's steps; how it gets a cluster and its
records is the same for all of them.
"""

from __future__ import annotations

import contextlib
import sys
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ground.errors import GregorError
from harness.lab import Lab


@contextlib.contextmanager
def trial_lab(name: str):
    """The running lab `name`, or one brought up (as `gregor lab up` does) and taken down after."""
    started = False
    try:
        lab = Lab.attach(name)
    except GregorError:
        lab, started = Lab.up(name=name, progress=lambda message: print(message, flush=True)), True
    try:
        yield lab
    finally:
        if started:
            Lab.down(name, progress=None)


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    """A group member that commits only by hand, reads committed records, and starts from
    the earliest offset where its group has none; `extra` adds or overrides settings."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 6000,
        **extra,
    }


def topic_of_records(bootstrap: str, prefix: str, partitions: int, records: int) -> str:
    """A fresh topic (replication 3) whose partition p holds `records` records, numbered
    across partitions (record i goes to partition i % partitions)."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    for future in admin.create_topics([NewTopic(topic, partitions, 3)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(records * partitions):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    if producer.flush(30):
        raise GregorError(f"could not write the test records to {topic} in 30 s")
    return topic


def run(main) -> None:
    """Exits with main()'s status; a GregorError is one line on stderr and status 1."""
    try:
        sys.exit(main())
    except GregorError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
