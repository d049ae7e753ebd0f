"""The temporary main job: a real cluster, acks=all writes, reads back, teardown.

Later issues replace it with the full fault-injection run; until then it
proves end to end that the lab carries records.
"""

from __future__ import annotations

import time
from typing import Callable

from confluent_kafka import Consumer, Producer

from harness.errors import GregorError
from harness.lab import Lab

DEMO_TOPIC = "gregor-demo"


def produce(bootstrap: str, topic: str, count: int, timeout: float = 60) -> dict[int, int]:
    """Sends `count` records (value = sequence number) with acks=all; returns {seq: offset}."""
    acked: dict[int, int] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err.str())
        else:
            acked[int(msg.value())] = msg.offset()

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for seq in range(count):
        producer.produce(topic, key=b"demo", value=str(seq).encode(), on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or errors:
        raise GregorError(f"{len(errors)} records failed, {remaining} unsent: {errors[:1]}")
    return acked


def consume(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[int]:
    """Reads the topic from the start until `count` values arrived (or timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"gregor-demo-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    values: list[int] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            values.append(int(msg.value()))
    finally:
        consumer.close()
    return values


def run_demo(name: str | None = None, version: str | None = None, records: int = 1000,
             progress: Callable[[str], None] = print) -> int:
    lab = None
    try:
        lab = Lab.up(nodes=3, version=version, name=name, progress=progress)
        admin = lab.admin()
        admin.create_topic(DEMO_TOPIC, partitions=1, replication_factor=3)
        lab.wait_healthy([DEMO_TOPIC], timeout=30)
        started = time.monotonic()
        acked = produce(lab.bootstrap_servers, DEMO_TOPIC, records)
        produce_s = time.monotonic() - started
        values = consume(lab.bootstrap_servers, DEMO_TOPIC, records)
        in_order = values == sorted(values) and values == list(range(records))
        lost = records - len(set(values))
        progress("")
        progress(f"demo summary (Kafka {lab.version}, 3 nodes, lab {lab.name})")
        progress(f"  lab up:        {lab.up_seconds:.1f} s to a healthy cluster")
        progress(f"  produced:      {records} records, {len(acked)} acknowledged with acks=all "
                 f"in {produce_s:.2f} s")
        progress(f"  consumed:      {len(values)} records, {lost} missing, "
                 f"{len(values) - len(set(values))} duplicated")
        progress(f"  order:         {'every record in the order it was sent' if in_order else 'OUT OF ORDER'}")
        ok = len(acked) == records and in_order and lost == 0
        progress(f"  verdict:       {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        progress("tearing the lab down")
        Lab.down(lab.name if lab else name, progress=progress)
