"""The `eos` workload: consume-transform-produce with exactly-once semantics.

A feeder produces to the input keys continuously; copiers in one consumer
group read the input (read_committed, a `poll` op), then write one output
per input record inside a transaction (each output send carries `from`: the
input key and value), commit their read positions with
send_offsets_to_transaction, and commit; a verifier reads the output keys
read_committed. Output key of input key K is K + (number of input keys).
Output values are fresh (unique per key even when an input is copied
twice); `from` links them to inputs.
"""

from __future__ import annotations

import time

from workloads import queue
from workloads.client import Client
from workloads.generators import Pacer, Plans
from workloads.kafka_client import Consumer
from workloads.kafka_io import KeyMap, RebalanceLog, close_consumer, consumer_config, read_messages
from workloads.txn import TransactionalProducer, TxnRunner, needs_new_instance

MIN_CONCURRENCY = 3


def split_keys(keys: list[int]) -> tuple[list[int], list[int]]:
    """Input keys are the first half, output keys the second."""
    half = len(keys) // 2
    return keys[:half], keys[half:]


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    inputs, outputs = split_keys(keys)
    return [
        {"role": "feeder", "keys": inputs},
        {"role": "verifier", "keys": outputs, "options": {"subscribe": False, "commit": False}},
    ] + [
        {"role": "copier", "keys": inputs, "txn": True, "group": True, "extra": {"out_offset": len(inputs)}}
        for _ in range(concurrency - 2)
    ]


def make_client(spec, link):
    if spec.role == "feeder":
        return queue.ProducerClient(spec, link)
    if spec.role == "verifier":
        return queue.ConsumerClient(spec, link)
    return CopierClient(spec, link)


class CopierClient(Client):
    def start(self) -> None:
        self.keymap = KeyMap(self.spec.key_map)
        if not hasattr(self, "plans"):
            self.plans = Plans.for_spec(self.spec, default_abort_ratio=0.05)
            self.pacer = Pacer(None)
        self.out_offset = int(self.spec.extra["out_offset"])
        self.rebalance = RebalanceLog(self.keymap)
        self.runner = TxnRunner(self, self.keymap)
        self.consumer = Consumer(consumer_config(self.spec, self.spec.group, isolation="read_committed"))
        keys = list(self.spec.keys)
        self.invoke("subscribe", keys=keys, group=self.spec.group)
        self.consumer.subscribe(
            self.keymap.topics(keys),
            on_assign=self.rebalance.on_assign,
            on_revoke=self.rebalance.on_revoke,
            on_lost=self.rebalance.on_lost,
        )
        self.complete("ok")
        self.tp = None
        self.open_producer()

    def open_producer(self) -> None:
        while self.link.running():
            self.tp = TransactionalProducer(self, self.spec.txn_id)
            if self.tp.init():
                return
            self.tp.abandon()
            self.tp = None
            time.sleep(0.5)

    def close(self) -> None:
        if getattr(self, "tp", None) is not None:
            self.tp.abandon()
        self.tp = None
        close_consumer(getattr(self, "consumer", None))
        self.consumer = None

    def outputs(self, polled: list) -> list[dict]:
        return [
            {
                "f": "send",
                "key": mop["key"] + self.out_offset,
                "value": self.plans.output(),
                "from": [mop["key"], mop["value"]],
            }
            for mop in polled
        ]

    def step(self) -> None:
        if self.tp is None:
            time.sleep(0.05)
            return
        abort = self.plans.rng.random() < self.plans.abort_ratio
        process = self.process
        done = self.copy(self.spec.options.get("copier.offsets", "txn"), abort)
        if done is None:
            return
        if self.process == process and needs_new_instance(done, self.tp):
            self.tp.abandon()
            self.open_producer()

    def copy(self, mode: str, abort: bool) -> dict | None:
        """One copy: a `poll` op of the group, then a `txn` op whose invoke
        already names every output it will write, with its `from`.

        The outputs are decided before the transaction starts, as a Kafka
        copier does (poll, then begin, produce, commit), so that a copier
        SIGKILLed inside its transaction still leaves a history that says what
        it read and wrote: the pool completes a killed client's op from its
        invoke (`info`, sends kept), and the commit it had asked for may well go
        through. Its inputs then lie below the group's next committed
        position, read by an `ok` poll and copied by outputs the checker knows.

        `mode` says where the input offsets are committed: `txn` inside the
        transaction (send_offsets_to_transaction), `after` once it committed,
        `before` before it begins.

        The copier's window lies between its two commits: `after`, outputs
        committed and offsets not yet; `before`, offsets committed and outputs
        not yet; `txn`, outputs written and offsets sent, neither committed
        (both commit together). It tells the pool when it enters and leaves it
        (the nemesis target `client:copier:window`) and works `process.ms`
        inside it, so a fault aimed there lands there on either side of a claim.
        """
        process = self.process
        polled = self.poll_op()
        if not polled or self.process != process:
            return None
        work_s = int(self.spec.options.get("process.ms") or 0) / 1000
        try:
            return self.copy_polled(mode, abort, polled, process, work_s)
        finally:
            if self.process == process:
                self.link.emit({"_window": None})

    def copy_polled(self, mode: str, abort: bool, polled: list, process: int, work_s: float) -> dict | None:
        if mode == "before":
            committed = queue.commit_read(
                self, self.consumer, self.keymap, self.spec.group, polled, self.rebalance.assigned
            )
            if self.process != process:
                return None
            if committed == "ok":
                self.enter_window(work_s)
        inside = mode == "txn"
        done = self.runner.run(
            self.tp,
            self.outputs(polled),
            abort,
            group=self.spec.group,
            consumer=self.consumer if inside else None,
            read=polled if inside else None,
            hold_s=work_s if inside else 0.0,
            window=inside,
        )
        if self.process != process:
            return done
        if done["type"] == "ok" and mode == "after":
            self.enter_window(work_s)
            queue.commit_read(self, self.consumer, self.keymap, self.spec.group, polled, self.rebalance.assigned)
        elif done["type"] != "ok" and not inside:
            self.runner.rewind(self.consumer, polled)  # copy them again (a live copier retries)
        return done

    def enter_window(self, work_s: float) -> None:
        """Tells the pool it is between its two commits, then works there."""
        self.link.emit({"_window": self.link.now_ns()})
        if work_s:
            time.sleep(work_s)

    def poll_op(self) -> list[dict]:
        """A `poll` op of the copier's group; the records read."""
        self.invoke("poll", [{"f": "poll"}], group=self.spec.group)
        try:
            messages = self.consumer.consume(num_messages=50, timeout=0.5)
        except Exception as exc:  # noqa: BLE001 - recorded as the op's failure
            from workloads import outcomes

            self.complete("fail", [], error=outcomes.name_of(exc), **self.rebalance_fields())
            return []
        mops, _ = read_messages(messages, self.keymap)
        self.complete("ok", mops, **self.rebalance_fields())
        return mops

    def rebalance_fields(self) -> dict:
        entries = self.rebalance.take()
        return {"rebalance": entries} if entries else {}
