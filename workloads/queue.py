"""The `queue` workload: plain producers and polling consumers.

Producers send small batches (one op, several send mops, each its own
value) with the configured acks / idempotence / in-flight / retries;
consumers poll by assign or subscribe and commit offsets after processing
(or let auto commit do it, recorded through on_commit).
"""

from __future__ import annotations

import time

from workloads import outcomes
from workloads.client import Client
from workloads.generators import Pacer, Plans
from workloads.kafka_client import Consumer, KafkaException, Producer
from workloads.kafka_io import (
    KeyMap,
    RebalanceLog,
    abandon_producer,
    close_consumer,
    consumer_config,
    encode,
    join_keys,
    producer_config,
    read_messages,
)

MIN_CONCURRENCY = 2


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    """Half producers (rounded up), half consumers."""
    producers = (concurrency + 1) // 2
    return [{"role": "producer", "keys": keys} for _ in range(producers)] + [
        {"role": "consumer", "keys": keys} for _ in range(concurrency - producers)
    ]


def make_client(spec, link):
    if spec.role == "producer":
        return ProducerClient(spec, link)
    return ConsumerClient(spec, link)


class ProducerClient(Client):
    """Sends batches; one op in flight, its sends flushed before it completes."""

    def start(self) -> None:
        self.keys = KeyMap(self.spec.key_map)
        if not hasattr(self, "plans"):
            self.plans = Plans.for_spec(self.spec)
            self.pacer = Pacer(self.spec.rate)
        self.conf = producer_config(self.spec)
        self.producer = Producer(self.conf)
        opts = self.spec.options
        self.may_retry = (
            opts.get("retries") is None or int(opts["retries"]) > 0 or bool(opts.get("enable.idempotence", True))
        )
        self.batch = int(opts.get("batch", 1))
        if not hasattr(self, "unsure"):
            # --resend: what the killed process this one replaces had in flight
            self.unsure = list(self.spec.extra.get("resend") or [])

    def close(self) -> None:
        abandon_producer(getattr(self, "producer", None))
        self.producer = None

    def step(self) -> None:
        if not self.pacer.wait(self.spec.deadline):
            time.sleep(min(0.05, max(0.0, self.spec.deadline - time.monotonic())))
            return
        resend = bool(self.unsure)
        mops, self.unsure = (self.unsure, []) if resend else (self.plans.sends(self.batch), [])
        self.invoke("send", mops, **({"resend": True} if resend else {}))
        results: list = [None] * len(mops)

        def delivered(i):
            def callback(err, msg):
                results[i] = ("err", err) if err is not None else ("ok", msg.offset())

            return callback

        for i, mop in enumerate(mops):
            key, value = encode(mop["key"], mop["value"])
            tp = self.keys.tp(mop["key"])
            while True:
                try:
                    self.producer.produce(
                        tp.topic, value=value, key=key, partition=tp.partition, on_delivery=delivered(i)
                    )
                    break
                except BufferError:
                    self.producer.poll(0.01)
                except KafkaException as exc:
                    results[i] = ("err", outcomes.error_of(exc))
                    break
        self.flush_wait()
        wait_s = self.conf["message.timeout.ms"] / 1000 + 5
        end = time.monotonic() + wait_s
        while any(r is None for r in results) and time.monotonic() < end:
            self.producer.flush(min(0.5, max(0.0, end - time.monotonic())))
        self.finish(mops, results)

    def flush_wait(self) -> None:
        """Time between producing an op's records and waiting for them (none here)."""

    def finish(self, mops, results) -> None:
        out, types, first_error, fatal = [], [], None, False
        for mop, result in zip(mops, results):
            done = dict(mop)
            if result is None:
                types.append("info")
                first_error = first_error or "_TIMED_OUT"
            elif result[0] == "ok":
                done["offset"] = result[1] if result[1] is not None and result[1] >= 0 else None
                types.append("ok")
            else:
                outcome = outcomes.classify(result[1], outcomes.SEND, retries=self.may_retry)
                types.append(outcome.type)
                first_error = first_error or outcome.error
                fatal = fatal or bool(result[1] is not None and result[1].fatal())
            out.append(done)
        kind = outcomes.combine(types)
        self.complete(kind, out, error=first_error if kind != "ok" else None)
        if fatal and kind != "info":  # info already replaced the producer
            self.reset()


class ConsumerClient(Client):
    """Polls assigned or subscribed keys; commits what it processed."""

    def start(self) -> None:
        self.keymap = KeyMap(self.spec.key_map)
        opts = self.spec.options
        self.subscribe = bool(opts.get("subscribe"))
        self.auto_commit = bool(opts.get("auto.commit"))
        self.group = self.spec.group or f"gregor-assign-{self.spec.slot}"
        self.rebalance = RebalanceLog(self.keymap)
        self.auto_commits: list = []
        self.closing = False
        callbacks = {"on_commit": self.on_commit} if self.auto_commit else {}
        self.consumer = Consumer(consumer_config(self.spec, self.group, auto_commit=self.auto_commit, **callbacks))
        join_keys(self, list(self.spec.keys), self.subscribe, self.group)

    def close(self) -> None:
        self.closing = True
        close_consumer(getattr(self, "consumer", None))
        self.consumer = None

    def on_commit(self, err, partitions) -> None:
        if not self.closing:
            self.auto_commits.append((err, partitions, self.link.now_ns()))

    def group_fields(self) -> dict:
        """Polls name the group whose offsets this consumer commits (checkers
        compare a group's committed positions with what its pollers read)."""
        commits = self.auto_commit or self.spec.options.get("commit", True)
        return {"group": self.group} if (self.subscribe or commits) else {}

    def step(self) -> None:
        self.invoke("poll", [{"f": "poll"}], **self.group_fields())
        try:
            messages = self.consumer.consume(num_messages=500, timeout=0.2)
        except KafkaException as exc:
            extra = self.rebalance_fields()
            self.complete("fail", [], error=outcomes.name_of(exc), **extra)
            if outcomes.error_of(exc) is not None and outcomes.error_of(exc).fatal():
                self.reset()
            return
        mops, _transient = read_messages(messages, self.keymap)
        process_ms = int(self.spec.options.get("process.ms") or 0)
        if mops and process_ms:
            # tells the pool first: a kill while it works still lists what it read
            self.link.emit({"_polled": mops})
            time.sleep(process_ms / 1000)  # the work on what was polled, before the op completes
        self.complete("ok", mops, **self.rebalance_fields())
        self.record_auto_commits()
        if mops and not self.auto_commit and self.spec.options.get("commit", True):
            self.commit(mops)

    def rebalance_fields(self) -> dict:
        entries = self.rebalance.take()
        return {"rebalance": entries} if entries else {}

    def commit(self, mops) -> None:
        commit_read(
            self, self.consumer, self.keymap, self.group, mops, self.rebalance.assigned if self.subscribe else None
        )

    def record_auto_commits(self) -> None:
        """Auto commits seen by on_commit during the last op, as their own ops."""
        pending, self.auto_commits = self.auto_commits, []
        for err, partitions, _when in pending:
            mops = []
            for tp in partitions or []:
                key = self.keymap.key_of(tp.topic, tp.partition)
                if key is not None and tp.offset >= 0:
                    mops.append({"f": "commit", "key": key, "offset": tp.offset})
            if not mops:
                continue
            self.invoke("commit", mops, group=self.group, auto=True)
            if err is None:
                bad = [tp.error for tp in partitions if tp.error is not None]
                err = bad[0] if bad else None
            if err is None:
                self.complete("ok", mops, auto=True)
            else:
                outcome = outcomes.classify(err, outcomes.COMMIT)
                self.complete(outcome.type, mops, error=outcome.error, auto=True)


def commit_read(client: Client, consumer, keymap: KeyMap, group: str, mops, assigned=None) -> str | None:
    """Commits, as one `commit` op, the positions after the records `mops` read
    (only keys in `assigned`, when given); returns the op's type (None: nothing to commit)."""
    nexts: dict[int, int] = {}
    for mop in mops:
        if mop.get("f") == "poll":
            nexts[mop["key"]] = max(nexts.get(mop["key"], -1), mop["offset"] + 1)
    if assigned is not None:
        nexts = {k: o for k, o in nexts.items() if k in assigned}
    if not nexts:
        return None
    commit_mops = [{"f": "commit", "key": k, "offset": o} for k, o in sorted(nexts.items())]
    client.invoke("commit", commit_mops, group=group)
    try:
        result = consumer.commit(offsets=[keymap.tp(k, o) for k, o in sorted(nexts.items())], asynchronous=False)
    except KafkaException as exc:
        outcome = outcomes.classify(exc, outcomes.COMMIT)
        client.complete(outcome.type, commit_mops, error=outcome.error)
        return outcome.type
    failed = [tp.error for tp in (result or []) if tp.error is not None]
    if failed:
        outcome = outcomes.classify(failed[0], outcomes.COMMIT)
        client.complete(outcome.type, commit_mops, error=outcome.error)
        return outcome.type
    client.complete("ok", commit_mops)
    return "ok"
