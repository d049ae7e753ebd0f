"""Shared confluent-kafka plumbing of the workload clients.

Builds producer/consumer configs from the run options, encodes records
(key and value as decimal text) and turns consumed messages into poll mops
through test.json's key map, the one authority on key -> partition.
"""

from __future__ import annotations

import json
import time

from workloads import outcomes
from workloads.kafka_client import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

QUIET_ERRORS = {KafkaError._PARTITION_EOF}


class KeyMap:
    """key <-> (topic, partition) as in test.json."""

    def __init__(self, key_map: dict):
        self.by_key = {int(k): (tp[0], int(tp[1])) for k, tp in key_map.items()}
        self.by_tp = {tp: k for k, tp in self.by_key.items()}

    def tp(self, key: int, offset: int | None = None) -> TopicPartition:
        topic, partition = self.by_key[key]
        if offset is None:
            return TopicPartition(topic, partition)
        return TopicPartition(topic, partition, offset)

    def key_of(self, topic: str, partition: int) -> int | None:
        return self.by_tp.get((topic, partition))

    def topics(self, keys) -> list[str]:
        return sorted({self.by_key[k][0] for k in keys})


def producer_config(spec, transactional_id: str | None = None) -> dict:
    opts = spec.options
    conf = {
        **spec.client_config,  # the lab's client settings (security) first: Gregor's own win
        "bootstrap.servers": spec.bootstrap,
        "client.id": f"gregor-{spec.role}-{spec.slot}",
        "acks": str(opts.get("acks", "all")),
        "enable.idempotence": bool(opts.get("enable.idempotence", True)),
        "max.in.flight.requests.per.connection": int(opts.get("max.in.flight", 5)),
        "message.timeout.ms": int(opts.get("message.timeout.ms", 10000)),
        "request.timeout.ms": int(opts.get("request.timeout.ms", 5000)),
        "linger.ms": int(opts.get("linger.ms", 2)),
        "socket.timeout.ms": 10000,
        "reconnect.backoff.max.ms": 1000,
    }
    if opts.get("retries") is not None:
        conf["retries"] = int(opts["retries"])
    if transactional_id:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = int(opts.get("transaction.timeout.ms", 10000))
        conf["enable.idempotence"] = True
        conf["acks"] = "all"
        conf["max.in.flight.requests.per.connection"] = min(5, conf["max.in.flight.requests.per.connection"])
    conf.update(librdkafka_settings(opts.get("producer_config")))
    return conf


def librdkafka_settings(extra: dict | None) -> dict:
    """--producer-config/--consumer-config values, as librdkafka wants them (text,
    numbers as ints, true/false as booleans)."""
    out = {}
    for key, value in (extra or {}).items():
        text = str(value)
        if text.lower() in ("true", "false"):
            out[key] = text.lower() == "true"
        elif text.lstrip("-").isdigit():
            out[key] = int(text)
        else:
            out[key] = text
    return out


def consumer_config(spec, group: str, isolation: str | None = None, auto_commit: bool = False, **callbacks) -> dict:
    opts = spec.options
    conf = {
        **spec.client_config,  # the lab's client settings (security) first: Gregor's own win
        "bootstrap.servers": spec.bootstrap,
        "client.id": f"gregor-{spec.role}-{spec.slot}",
        "group.id": group,
        "enable.auto.commit": bool(auto_commit),
        "auto.offset.reset": "earliest",
        "isolation.level": isolation or opts.get("isolation.level", "read_committed"),
        "session.timeout.ms": int(opts.get("session.timeout.ms", 6000)),
        "heartbeat.interval.ms": 1000,
        "socket.timeout.ms": 10000,
        "reconnect.backoff.max.ms": 1000,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    }
    if auto_commit:
        conf["auto.commit.interval.ms"] = int(opts.get("auto.commit.interval.ms", 1000))
    conf.update(librdkafka_settings(opts.get("consumer_config")))
    conf.update(callbacks)
    return conf


def encode(key: int, value: int) -> tuple[bytes, bytes]:
    return str(key).encode(), str(value).encode()


def decode_value(raw: bytes | None) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def read_messages(messages, keys: KeyMap, poll_no: int | None = None) -> tuple[list, list]:
    """(poll mops, errors) from consumed messages; errors are KafkaErrors seen."""
    mops, errors = [], []
    for msg in messages:
        err = msg.error()
        if err is not None:
            if err.code() not in QUIET_ERRORS:
                errors.append(err)
            continue
        key = keys.key_of(msg.topic(), msg.partition())
        value = decode_value(msg.value())
        if key is None or value is None:
            continue  # not ours: another run's or a foreign record
        mop = {"f": "poll", "key": key, "offset": msg.offset(), "value": value}
        if poll_no is not None:
            mop["poll"] = poll_no
        mops.append(mop)
    return mops, errors


class RebalanceLog:
    """Collects on_assign/on_revoke/on_lost during an op, as `rebalance` entries."""

    def __init__(self, keys: KeyMap):
        self.keys = keys
        self.entries: list = []
        self.assigned: set = set()

    def _keys(self, partitions) -> list[int]:
        found = [self.keys.key_of(p.topic, p.partition) for p in partitions]
        return sorted(k for k in found if k is not None)

    def on_assign(self, consumer, partitions) -> None:
        keys = self._keys(partitions)
        self.assigned.update(keys)
        self.entries.append({"type": "assigned", "keys": keys})

    def on_revoke(self, consumer, partitions) -> None:
        keys = self._keys(partitions)
        self.assigned.difference_update(keys)
        self.entries.append({"type": "revoked", "keys": keys})

    def on_lost(self, consumer, partitions) -> None:
        self.on_revoke(consumer, partitions)

    def take(self) -> list:
        entries, self.entries = self.entries, []
        return entries


class StatsWatch:
    """The producer id and epoch librdkafka reports in its statistics ("eos").

    confluent-kafka has no call for the epoch; librdkafka's statistics JSON
    carries it (eos.producer_id, eos.producer_epoch), emitted every
    statistics.interval.ms from poll().
    """

    def __init__(self):
        self.latest: dict | None = None

    def on_stats(self, raw: str) -> None:
        try:
            self.latest = json.loads(raw).get("eos")
        except ValueError:
            pass

    def assigned(self) -> tuple[int, int] | None:
        """(producer id, epoch) of the latest snapshot, if it had them (at most
        statistics.interval.ms old)."""
        eos = self.latest
        if eos and eos.get("producer_id", -1) >= 0 and eos.get("idemp_state") == "Assigned":
            return int(eos["producer_id"]), int(eos["producer_epoch"])
        return None

    def wait_assigned(self, producer, timeout_s: float = 3.0) -> tuple[int | None, int | None]:
        """Waits for a snapshot with an assigned producer id; (None, None) if none came."""
        self.latest = None
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            producer.poll(0.05)
            found = self.assigned()
            if found is not None:
                return found
        return None, None


def close_consumer(consumer) -> None:
    if consumer is None:
        return
    try:
        consumer.close()
    except Exception:
        pass


def abandon_producer(producer) -> None:
    """Drops a producer without waiting: whatever it still holds is purged."""
    if producer is None:
        return
    try:
        producer.purge(in_queue=True, in_flight=False, blocking=False)
        producer.flush(0)
    except Exception:
        pass


def join_keys(client, keys: list[int], subscribe: bool, group: str | None) -> None:
    """Points `client.consumer` at `keys` and records it as an op: `subscribe`
    through `group` (rebalances logged by `client.rebalance`) or `assign` from
    the beginning. Either resets the process's positions for the checker."""
    if not subscribe:
        client.invoke("assign", keys=keys)
        client.consumer.assign([client.keymap.tp(k, OFFSET_BEGINNING) for k in keys])
        client.complete("ok")
        return
    client.invoke("subscribe", keys=keys, group=group)
    try:
        client.consumer.subscribe(
            client.keymap.topics(keys),
            on_assign=client.rebalance.on_assign,
            on_revoke=client.rebalance.on_revoke,
            on_lost=client.rebalance.on_lost,
        )
    except KafkaException as exc:
        client.complete("fail", error=outcomes.name_of(exc))
        raise
    client.complete("ok")
