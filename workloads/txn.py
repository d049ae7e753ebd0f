"""The `txn` workload: transactional producers that also read.

Each process owns one transactional.id and runs transactions of 1-4 micro-
ops mixing sends to several keys with read_committed polls; some are aborted
on purpose (a definite failure: `fail`, error "aborted-on-purpose"). Polling
through a group (--subscribe) commits the read positions inside the
transaction with send_offsets_to_transaction (commit mops). Every producer
instance starts with a recorded `init` op whose `ok` completion carries the
producer id and epoch it was given, and each `txn` completion carries the
ones its transaction ran under, where known (TransactionalProducer.ids):
under transaction protocol v2 (KIP-890, Kafka's Java client 4.x on brokers
with transaction.version=2) the epoch grows with every transaction.
"""

from __future__ import annotations

import random
import time

from workloads import kafka_client, outcomes
from workloads.client import Client
from workloads.completions import with_unperformed_sends
from workloads.conductor import Conductor
from workloads.generators import Pacer, Plans, TxnPlan
from workloads.kafka_client import Consumer, KafkaException, Producer
from workloads.kafka_io import (
    KeyMap,
    RebalanceLog,
    StatsWatch,
    abandon_producer,
    close_consumer,
    consumer_config,
    encode,
    join_keys,
    producer_config,
    read_messages,
)

MIN_CONCURRENCY = 1
ABORTED_ON_PURPOSE = "aborted-on-purpose"
CALL_TIMEOUT_S = 10.0
POLL_TIMEOUT_S = 0.02  # a poll mop inside a transaction: short, the transaction is open


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    return [{"role": "txn", "keys": keys, "txn": True} for _ in range(concurrency)]


def make_client(spec, link):
    return TxnClient(spec, link)


class TransactionalProducer:
    """One producer instance of a transactional.id, with its init recorded."""

    def __init__(self, client: Client, txn_id: str):
        self.client = client
        self.txn_id = txn_id
        self.stats = StatsWatch()
        conf = producer_config(client.spec, transactional_id=txn_id)
        conf["statistics.interval.ms"] = 1000
        conf["stats_cb"] = self.stats.on_stats
        self.timeout_ms = conf["transaction.timeout.ms"]
        self.producer = Producer(conf)
        self.unusable: str | None = None  # set when an abort finds the instance fenced
        self.abort_pending = False  # an abort timed out and must be called again (workloads/script.py)

    def init(self) -> bool:
        """Records an `init` op; True when the instance may run transactions."""
        client = self.client
        client.invoke("init", txn_id=self.txn_id)
        try:
            self.producer.init_transactions(CALL_TIMEOUT_S)
        except KafkaException as exc:
            outcome = outcomes.classify(exc, outcomes.INIT)
            client.complete(outcome.type, error=outcome.error)
            return False
        producer_id, epoch = kafka_client.producer_ids(self.producer) or self.stats.wait_assigned(self.producer)
        known = {}
        if producer_id is not None:
            known = {"producer_id": producer_id, "epoch": epoch}
        client.complete("ok", **known)
        return True

    def ids(self) -> dict:
        """The producer id and epoch this instance runs under now, where known: read at
        once from the Java client's transaction manager, or librdkafka's latest statistics
        (at most statistics.interval.ms old: librdkafka changes neither within an
        instance except by an epoch bump after an abortable error)."""
        found = kafka_client.producer_ids(self.producer) or self.stats.assigned()
        return {"producer_id": found[0], "epoch": found[1]} if found else {}

    def abandon(self) -> None:
        abandon_producer(self.producer)


class TxnRunner:
    """Runs one transaction plan on a producer (and optionally a consumer)."""

    def __init__(self, client: Client, keymap: KeyMap):
        self.client = client
        self.keymap = keymap

    def run(
        self,
        tp: TransactionalProducer,
        mops: list,
        abort: bool,
        consumer=None,
        group: str | None = None,
        rebalance: RebalanceLog | None = None,
        extra_invoke: dict | None = None,
        read: list | None = None,
        hold_s: float = 0.0,
        window: bool = False,
    ) -> dict:
        """Invokes, performs and completes one `txn` op; returns the completion.

        `read`: records an earlier op of this client polled (a copier's): like
        the op's own polls, their positions are committed in the transaction
        (with `group` and `consumer`) and a failed transaction rewinds to them.
        `window`: once the writes are acknowledged, tell the pool the client is
        in its window (a copier's, until it says it left; see workloads/eos.py).
        """
        client = self.client
        invoke_fields = {"txn_id": tp.txn_id}
        if group:
            invoke_fields["group"] = group
        invoke_fields.update(extra_invoke or {})
        client.invoke("txn", mops, **invoke_fields)
        out: list = []
        polled: list = list(read or [])
        delivered: dict = {}
        commit_time = None
        producer = tp.producer
        polls = 0
        ids: dict = {}  # the producer id and epoch the transaction runs under

        def on_delivery(mop):
            def callback(err, msg):
                delivered[id(mop)] = (err, msg.offset() if err is None else None)

            return callback

        def send(mop):
            out.append(mop)
            key, value = encode(mop["key"], mop["value"])
            topic_partition = self.keymap.tp(mop["key"])
            while True:
                try:
                    producer.produce(
                        topic_partition.topic,
                        value=value,
                        key=key,
                        partition=topic_partition.partition,
                        on_delivery=on_delivery(mop),
                    )
                    return
                except BufferError:
                    producer.poll(0.01)

        def extras() -> dict:
            fields = dict(ids)
            if commit_time is not None:
                fields["commit_time"] = commit_time
            if rebalance is not None:
                entries = rebalance.take()
                if entries:
                    fields["rebalance"] = entries
            return fields

        def listed() -> list:
            """What the op did, plus the invoke's sends it never performed
            (begin_transaction of an instance already fenced raises first)."""
            return with_unperformed_sends(out, mops)

        def fill_offsets():
            for mop in out:
                if mop.get("f") == "send" and id(mop) in delivered:
                    err, offset = delivered[id(mop)]
                    if err is None and offset is not None and offset >= 0:
                        mop["offset"] = offset

        try:
            producer.begin_transaction()
            ids.update(tp.ids())
            for mop in mops:
                if mop["f"] == "send":
                    send(dict(mop))
                elif consumer is not None:
                    polls += 1
                    got, _ = read_messages(
                        consumer.consume(num_messages=50, timeout=POLL_TIMEOUT_S), self.keymap, poll_no=polls
                    )
                    out.extend(got)
                    polled.extend(got)
            if group and consumer is not None and polled:
                commits = self.positions(polled)
                if commits:
                    consumer_offsets = [self.keymap.tp(k, o) for k, o in commits]
                    producer.send_offsets_to_transaction(
                        consumer_offsets, consumer.consumer_group_metadata(), CALL_TIMEOUT_S
                    )
                    out.extend({"f": "commit", "key": k, "offset": o} for k, o in commits)
            remaining = producer.flush(CALL_TIMEOUT_S)
            failed = [err for err, _ in delivered.values() if err is not None]
            if failed or remaining:
                raise KafkaException(failed[0]) if failed else TimeoutError("flush")
            if window:
                client.link.emit({"_window": client.link.now_ns()})
            if hold_s:
                if delivered:
                    # tells the pool the writes are acknowledged: the transaction is
                    # open on the broker, the moment a hang conductor waits for
                    client.link.emit({"_written": client.link.now_ns()})
                time.sleep(hold_s)  # work between writes and commit
            if abort:
                fill_offsets()
                self.abort(tp)
                self.rewind(consumer, polled)
                return client.complete("fail", listed(), error=ABORTED_ON_PURPOSE, **extras())
        except (KafkaException, TimeoutError) as exc:
            fill_offsets()
            self.abort(tp)
            self.rewind(consumer, polled)
            outcome = outcomes.classify(
                exc
                if isinstance(exc, KafkaException)
                else KafkaException(outcomes.KafkaError(outcomes.KafkaError._TIMED_OUT)),
                outcomes.TXN_BODY,
            )
            return client.complete("fail", listed(), error=outcome.error, **extras())

        fill_offsets()
        commit_time = client.link.now_ns()
        # tells the pool first: if this process is killed from here on, its op is
        # not an open transaction (the commit may go through) but one that asked to commit
        client.link.emit({"_committing": commit_time})
        exc, commit_tried = commit(producer)
        if exc is None:
            fill_offsets()
            return client.complete("ok", listed(), **extras())
        err = outcomes.error_of(exc)
        outcome = outcomes.classify(exc, outcomes.TXN_COMMIT, commit_attempted_before=commit_tried)
        if err is not None and err.txn_requires_abort():
            self.abort(tp)
        if outcome.type == "fail":
            self.rewind(consumer, polled)
        return client.complete(outcome.type, listed(), error=outcome.error, **extras())

    def positions(self, polled: list) -> list[tuple[int, int]]:
        nexts: dict[int, int] = {}
        for mop in polled:
            nexts[mop["key"]] = max(nexts.get(mop["key"], -1), mop["offset"] + 1)
        return sorted(nexts.items())

    def abort(self, tp: TransactionalProducer) -> None:
        try:
            tp.producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            # fenced or fatal: the instance cannot run another transaction
            # (its next begin_transaction would raise), so it is replaced
            err = outcomes.error_of(exc)
            if err is not None and (err.fatal() or err.name() in outcomes.FENCING):
                tp.unusable = err.name()

    def rewind(self, consumer, polled: list) -> None:
        """Seeks back to the first record read in an aborted transaction.

        Its reads did not count (the op failed), so reading on from where the
        consumer stands would skip them.
        """
        if consumer is None or not polled:
            return
        first: dict[int, int] = {}
        for mop in polled:
            first.setdefault(mop["key"], mop["offset"])
        for key, offset in first.items():
            try:
                consumer.seek(self.keymap.tp(key, offset))
            except KafkaException:
                pass  # no longer assigned: the rebalance entry resets the position


def commit(producer) -> tuple[KafkaException | None, bool]:
    """commit_transaction, called again up to twice after a retriable error (librdkafka's
    advice; the Java facade's too): None when it committed, else the error it ended with; and
    whether an earlier call had been made (the commit may have gone through: outcomes.py)."""
    tried = False
    for attempt in range(3):
        try:
            producer.commit_transaction(CALL_TIMEOUT_S)
            return None, tried
        except KafkaException as exc:
            err = outcomes.error_of(exc)
            if err is not None and err.retriable() and attempt < 2:
                tried = True
                continue
            return exc, tried
    raise AssertionError("unreachable")


def needs_new_instance(completion: dict, tp: TransactionalProducer | None = None) -> bool:
    """After a fencing or fatal error the producer instance cannot go on
    (also when only the abort of an op, e.g. one aborted on purpose, found it fenced)."""
    return (
        completion.get("error") in outcomes.FENCING
        or completion.get("type") == "info"
        or bool(tp is not None and tp.unusable)
    )


class TxnClient(Client):
    """A transactional producer plus a read_committed consumer."""

    def start(self) -> None:
        self.keymap = KeyMap(self.spec.key_map)
        if not hasattr(self, "plans"):
            self.plans = Plans.for_spec(self.spec, default_abort_ratio=0.1)
            self.pacer = Pacer(self.spec.rate)
        opts = self.spec.options
        self.hold_s = int(opts.get("txn.hold.ms") or 0) / 1000
        if not hasattr(self, "unsure"):
            # --resend: what the killed process this one replaces had in flight
            self.unsure = list(self.spec.extra.get("resend") or [])
        self.subscribe = bool(opts.get("subscribe"))
        self.group = self.spec.group if self.subscribe else None
        self.rebalance = RebalanceLog(self.keymap) if self.subscribe else None
        self.runner = TxnRunner(self, self.keymap)
        self.tp = None
        self.open_consumer()
        self.open_producer()

    def open_producer(self) -> None:
        self.tp = TransactionalProducer(self, self.spec.txn_id)
        while not self.tp.init():
            self.tp.abandon()
            if not self.link.running():
                self.tp = None
                return
            time.sleep(0.5)
            self.tp = TransactionalProducer(self, self.spec.txn_id)

    def open_consumer(self) -> None:
        keys = list(self.spec.keys)
        group = self.spec.group or f"gregor-txn-{self.spec.slot}"
        self.consumer = Consumer(consumer_config(self.spec, group, isolation=self.spec.options.get("isolation.level")))
        join_keys(self, keys, self.subscribe, group)

    def close(self) -> None:
        if getattr(self, "tp", None) is not None:
            self.tp.abandon()
        self.tp = None
        close_consumer(getattr(self, "consumer", None))
        self.consumer = None

    def step(self) -> None:
        if self.tp is None:
            return
        if not self.pacer.wait(self.spec.deadline):
            time.sleep(min(0.05, max(0.0, self.spec.deadline - time.monotonic())))
            return
        resend = bool(self.unsure)
        plan = TxnPlan(self.unsure, False) if resend else self.plans.txn()
        self.unsure = []
        process = self.process
        done = self.runner.run(
            self.tp,
            plan.mops,
            plan.abort,
            consumer=self.consumer,
            group=self.group,
            rebalance=self.rebalance,
            hold_s=self.hold_s,
            extra_invoke={"resend": True} if resend else None,
        )
        if self.process == process and needs_new_instance(done, self.tp):
            self.tp.abandon()
            self.open_producer()


class HangConductor(Conductor):
    """Now and then pauses one transactional client where --hang says:
    `inside` a transaction (its writes sent, its commit not yet asked for:
    a hanging transaction that holds back the last stable offset of the
    partitions it wrote until the coordinator aborts it after
    transaction.timeout.ms) or `between` two transactions (nothing open)."""

    def __init__(
        self,
        faults,
        pool,
        slots: list[int],
        seed: int,
        where: str,
        hang_s: float,
        every_s: float = 4.0,
        deadline: float | None = None,
    ):
        super().__init__(faults, "hang-conductor", deadline)
        self.pool, self.slots, self.where, self.hang_s = pool, slots, where, hang_s
        self.rng = random.Random(f"hang:{seed}")
        self.every_s = every_s

    def run(self) -> None:
        while self.slots and self.sleep(self.every_s * (0.5 + self.rng.random())):
            if not self.room_for(self.hang_s + 5.0):
                break
            slot = self.rng.choice(self.slots)
            if not self.wait_for_moment(slot):
                continue
            if self.faults.pause(slot, f"hang {self.where} a transaction"):
                if not self.sleep(self.hang_s):
                    break
                self.faults.resume(slot, "end of hang")

    def wait_for_moment(self, slot: int, within_s: float = 5.0) -> bool:
        """Waits until the client is at the chosen moment: inside a txn op whose
        writes the brokers have acknowledged (so the transaction is open there
        and holds the last stable offset back), or with no op in flight."""
        end = time.monotonic() + within_s
        while time.monotonic() < end and not self.halt.is_set():
            if self.where == "inside":
                if self.pool.writes_acknowledged(slot):
                    return True
            elif self.pool.pending(slot) is None:
                return True
            time.sleep(0.005)
        return False
