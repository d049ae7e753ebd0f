"""The part of confluent-kafka's Producer and Consumer the workloads use, on Kafka's Java client.

Producer and Consumer take the same librdkafka config dicts (config_table.py
maps the names), call the same callbacks at the same moments (delivery
reports and statistics inside poll/flush, rebalance and commit callbacks
inside consume), and raise KafkaException with librdkafka's error names
(error_table.py), so that the workloads run the same code on either client
and write the same history.

Where the Java client cannot do what librdkafka does, the difference is said
where it lives (and in docs/CLIENTS.md): purge() closes the producer (Gregor
purges only to abandon one); a transactional call waits at most
max.block.ms (10 s, the workloads' call timeout) whatever timeout it is
given; commit(asynchronous=True) commits before it returns.
"""

from __future__ import annotations

import json
import weakref

from workloads.java_client import config_table, error_table
from workloads.java_client.jvm import driver
from workloads.java_client.kafka_types import OFFSET_INVALID, KafkaError, KafkaException, Message, TopicPartition

FOREVER_S = 24 * 3600.0  # confluent-kafka's "no timeout"


def _seconds(timeout) -> float:
    return FOREVER_S if timeout is None or timeout < 0 else float(timeout)


def _wire(data) -> str | None:
    """Bytes as text whose chars are the byte values: JSON carries them exactly."""
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    return bytes(data).decode("latin-1")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("latin-1")


def _part(tp) -> dict:
    """Any TopicPartition (confluent-kafka's or ours) as the driver reads it."""
    return {"t": tp.topic, "p": tp.partition, "offset": tp.offset}


def _tp(wire: dict) -> TopicPartition:
    tp = TopicPartition(wire["t"], wire["p"], wire.get("offset", OFFSET_INVALID))
    if wire.get("error"):
        tp.error = error_table.kafka_error(wire["error"])
    return tp


def _settings(conf, kwargs, role) -> config_table.Settings:
    merged = {**(conf or {}), **kwargs}
    try:
        return config_table.translate(merged, role)
    except config_table.JavaConfigError as error:
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, str(error))) from None


def _checked(reply: dict) -> dict:
    if not reply.get("ok"):
        raise KafkaException(error_table.kafka_error(reply["error"]))
    return reply


class GroupMetadata:
    """What consumer_group_metadata() returns: a snapshot the driver keeps, which the
    producer's send_offsets_to_transaction hands back to it."""

    def __init__(self, wire: dict):
        self.wire = wire

    def __repr__(self) -> str:
        return f"GroupMetadata({self.wire})"


class Producer:
    def __init__(self, conf=None, **kwargs):
        settings = _settings(conf, kwargs, config_table.PRODUCER)
        self._driver = driver()
        self._h = self._driver.handle()
        self._default_cb = settings.callbacks.get("on_delivery")
        self._stats_cb = settings.callbacks.get("stats_cb")
        self._client_id = settings.java.get("client.id", "")
        self._pending: dict[int, tuple] = {}
        self._next = 0
        _checked(self._driver.request("producer.new", h=self._h, conf=settings.java, stats_ms=settings.stats_ms))
        # a producer dropped is closed at once, as librdkafka's destroy does, and the driver forgets it
        weakref.finalize(self, self._driver.defer, {"op": "producer.forget", "h": self._h})

    # -- sending -----------------------------------------------------------------------
    def produce(
        self, topic, value=None, key=None, partition=-1, on_delivery=None, timestamp=0, headers=None, callback=None
    ):
        if headers:
            raise NotImplementedError("headers are not offered by the Java facade")
        self._next += 1
        self._pending[self._next] = (on_delivery or callback or self._default_cb, topic, partition, key, value)
        message = {"op": "produce", "h": self._h, "m": self._next, "t": topic, "p": partition}
        message["k"], message["v"] = _wire(key), _wire(value)
        if timestamp:
            message["ts"] = timestamp
        self._driver.send(message)

    def poll(self, timeout=None) -> int:
        reply = _checked(self._driver.request("producer.poll", h=self._h, timeout=_seconds(timeout)))
        return self._serve(reply.get("events") or [])

    def flush(self, timeout=None) -> int:
        reply = _checked(self._driver.request("producer.flush", h=self._h, timeout=_seconds(timeout)))
        self._serve(reply.get("events") or [])
        return len(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def _serve(self, events: list) -> int:
        """Calls the events' callbacks in order, as librdkafka's poll serves its queue."""
        first_error = None
        for event in events:
            try:
                if event["e"] == "dr":
                    self._delivered(event)
                elif event["e"] == "stats" and self._stats_cb:
                    self._stats_cb(self._stats(event))
            except Exception as exc:  # a callback's own error: raised after the others ran
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return len(events)

    def _stats(self, event: dict) -> str:
        """librdkafka's statistics JSON, with the one part Gregor reads ("eos")."""
        return json.dumps(
            {
                "name": self._client_id,
                "client_id": self._client_id,
                "type": "producer",
                "ts": event["ts"],
                "eos": event["eos"],
            }
        )

    def _delivered(self, event: dict) -> None:
        callback, topic, partition, key, value = self._pending.pop(event["m"])
        err = error_table.kafka_error(event["err"]) if event.get("err") else None
        offset = event.get("o", OFFSET_INVALID) if err is None else OFFSET_INVALID
        if callback is not None:
            callback(err, Message(topic, event.get("p", partition), offset, key, value, error=err))

    # -- transactions ------------------------------------------------------------------
    def _call(self, op: str, **fields) -> None:
        _checked(self._driver.request(f"producer.{op}", h=self._h, **fields))

    def init_transactions(self, timeout=None) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def commit_transaction(self, timeout=None) -> None:
        self._call("commit_transaction")

    def abort_transaction(self, timeout=None) -> None:
        self._call("abort_transaction")

    def send_offsets_to_transaction(self, positions, group_metadata, timeout=None) -> None:
        self._call("send_offsets_to_transaction", offsets=[_part(tp) for tp in positions], group=group_metadata.wire)

    def purge(self, in_queue=True, in_flight=True, blocking=True) -> None:
        """Closes the producer at once (Java has no purge): what it still holds fails,
        reported as _DESTROY (unknown outcome) on the next poll or flush."""
        self._call("purge")

    # -- not confluent-kafka's: what the driver reads from the client's internals ----------
    def ids(self) -> dict:
        """The transaction manager now: state, producer_id, producer_epoch, txn_version (1 or 2)."""
        return _checked(self._driver.request("producer.ids", h=self._h))["result"]


class Consumer:
    def __init__(self, conf=None, **kwargs):
        settings = _settings(conf, kwargs, config_table.CONSUMER)
        self._driver = driver()
        self._h = self._driver.handle()
        self._on_commit = settings.callbacks.get("on_commit")
        self._rebalance: dict = {}
        self._closed = False
        _checked(
            self._driver.request(
                "consumer.new",
                h=self._h,
                conf=settings.java,
                auto_commit=settings.auto_commit,
                auto_commit_ms=settings.auto_commit_ms,
            )
        )

    def _call(self, op: str, **fields):
        if self._closed:
            raise RuntimeError("Consumer closed")
        reply = self._driver.request(f"consumer.{op}", h=self._h, **fields)
        self._serve(reply.get("events") or [])
        return _checked(reply).get("result")

    def _serve(self, events: list) -> None:
        for event in events:
            parts = [_tp(p) for p in event.get("partitions") or []]
            kind = event["e"]
            if kind == "commit":
                if self._on_commit is not None:
                    err = error_table.kafka_error(event["err"]) if event.get("err") else None
                    self._on_commit(err, parts)
                continue
            callback = self._rebalance.get(kind)
            if kind == "lost" and callback is None:
                callback = self._rebalance.get("revoke")  # confluent-kafka: on_revoke stands in for on_lost
            if callback is not None:
                callback(self, parts)

    def assign(self, partitions) -> None:
        self._call("assign", partitions=[_part(tp) for tp in partitions])

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None) -> None:
        self._rebalance = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._call("subscribe", topics=list(topics))

    def unsubscribe(self) -> None:
        self._call("unsubscribe")

    def consume(self, num_messages=1, timeout=-1) -> list:
        wires = self._call("consume", n=int(num_messages), timeout=_seconds(timeout))
        return [Message(w["t"], w["p"], w["o"], _bytes(w["k"]), _bytes(w["v"]), timestamp=w.get("ts")) for w in wires]

    def poll(self, timeout=None):
        got = self.consume(1, -1 if timeout is None else timeout)
        return got[0] if got else None

    def commit(self, message=None, offsets=None, asynchronous=True):
        """Commits and waits (also when asynchronous: the result still reaches on_commit)."""
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        wire = None if offsets is None else [_part(tp) for tp in offsets]
        result = self._call("commit", offsets=wire)
        return None if asynchronous else [_tp(p) for p in result or []]

    def seek(self, partition) -> None:
        self._call("seek", partition=_part(partition))

    def position(self, partitions) -> list:
        return [_tp(p) for p in self._call("position", partitions=[_part(tp) for tp in partitions])]

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        if cached:
            raise NotImplementedError("cached watermarks are not offered by the Java facade")
        low, high = self._call("watermarks", partition=_part(partition), timeout=_seconds(timeout))
        return low, high

    def consumer_group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self._call("group_metadata"))

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._call("close", timeout=10.0)
        finally:
            self._closed = True
