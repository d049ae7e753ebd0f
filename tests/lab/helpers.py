"""Small client helpers shared by the lab tests."""

from __future__ import annotations

import os
import time

import pytest
from backend_params import lab_name
from confluent_kafka import Consumer, Producer

LAB_NAME = lab_name("labt")  # our own lab name, so other engineers' labs ("nem") never collide

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces)")


def produce(bootstrap: str, topic: str, values: list[str], timeout: float = 60) -> list[str]:
    """Sends values with acks=all; returns the values the cluster acknowledged."""
    acked: list[str] = []
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value().decode())
        else:
            errors.append(err.str())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
        }
    )
    for value in values:
        producer.produce(topic, value=value.encode(), on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(timeout + 5)
    assert not errors, errors[:3]
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[str]:
    """Reads the topic from its start until `expected` records arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value().decode())
    finally:
        consumer.close()
    return values


def leftovers(name: str, backend: str = "local") -> list[str]:
    """Everything of lab `name` that still exists: namespaces, links, processes, dirs, state."""
    from harness import registry
    from harness.lab import state_path

    found = registry.backend(backend).leftovers(name)
    if state_path(name).exists():
        found.append(f"state {state_path(name)}")
    return found
