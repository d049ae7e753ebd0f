"""The `eos` workload: consume-transform-produce with exactly-once semantics.

A feeder produces to the input keys continuously; copiers in one consumer
group read the input (read_committed), write one output per input record
inside a transaction (each output send carries `from`: the input key and
value), commit their read positions with send_offsets_to_transaction, and
commit; a verifier reads the output keys read_committed. Output key of
input key K is K + (number of input keys). Output values are fresh (unique
per key even when an input is copied twice); `from` links them to inputs.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from workloads import queue
from workloads.clients import Client
from workloads.generators import Pacer, Plans
from workloads.kafka_io import KeyMap, RebalanceLog, close_consumer, consumer_config
from workloads.txn import TransactionalProducer, TxnRunner, needs_new_instance

MIN_CONCURRENCY = 3


def split_keys(keys: list[int]) -> tuple[list[int], list[int]]:
    """Input keys are the first half, output keys the second."""
    half = len(keys) // 2
    return keys[:half], keys[half:]


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    inputs, outputs = split_keys(keys)
    return ([{"role": "feeder", "keys": inputs},
             {"role": "verifier", "keys": outputs,
              "options": {"subscribe": False, "commit": False}}]
            + [{"role": "copier", "keys": inputs, "txn": True, "group": True,
                "extra": {"out_offset": len(inputs)}}
               for _ in range(concurrency - 2)])


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
        self.consumer = Consumer(consumer_config(self.spec, self.spec.group,
                                                 isolation="read_committed"))
        keys = list(self.spec.keys)
        self.invoke("subscribe", keys=keys, group=self.spec.group)
        self.consumer.subscribe(self.keymap.topics(keys), on_assign=self.rebalance.on_assign,
                                on_revoke=self.rebalance.on_revoke,
                                on_lost=self.rebalance.on_lost)
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
        return [{"f": "send", "key": mop["key"] + self.out_offset, "value": self.plans.output(),
                 "from": [mop["key"], mop["value"]]} for mop in polled]

    def step(self) -> None:
        if self.tp is None:
            time.sleep(0.05)
            return
        abort = self.plans.rng.random() < self.plans.abort_ratio
        process = self.process
        done = self.runner.run(self.tp, [{"f": "poll"}], abort, consumer=self.consumer,
                               group=self.spec.group, rebalance=self.rebalance,
                               outputs=self.outputs, poll_timeout_s=0.5)
        if self.process == process and needs_new_instance(done, self.tp):
            self.tp.abandon()
            self.open_producer()
