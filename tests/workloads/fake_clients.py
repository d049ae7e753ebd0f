"""A stand-in workload for the ClientPool unit test: no Kafka, same plumbing.

Each op is a send of one fresh value whose outcome is decided by the plan:
every seventh op ends `info` (the client must continue as a new process).
"""

import time

from workloads.client import Client
from workloads.generators import Plans


def make_client(spec, link):
    kinds = {
        "sender": HangingSender,
        "committer": CommittingClient,
        "processor": ProcessingConsumer,
        "holder": HoldingClient,
        "jvm": JvmHolder,
        "copier": WindowedCopier,
    }
    return kinds.get(spec.role, FakeClient)(spec, link)


class FakeClient(Client):
    def start(self):
        if not hasattr(self, "plans"):
            self.plans = Plans(self.spec.seed, self.spec.slot, self.spec.stride, self.spec.keys, self.spec.generation)
            self.count = 0

    def step(self):
        mops = self.plans.sends(1)
        self.invoke("send", mops)
        time.sleep(0.01)
        self.count += 1
        if self.count % 7 == 0:
            self.complete("info", mops, error="_MSG_TIMED_OUT")
        else:
            self.complete("ok", [dict(m, offset=self.count) for m in mops])


class HangingSender(FakeClient):
    """A producer whose send is never acknowledged: a kill always lands while
    its op is in flight, however busy the machine."""

    def step(self):
        self.invoke("send", self.plans.sends(2))
        time.sleep(60)


class CommittingClient(FakeClient):
    """A transactional client that has asked Kafka to commit and hangs there:
    it tells the pool (`_committing`, as TxnRunner does) and never completes."""

    def step(self):
        mops = self.plans.sends(1)
        self.invoke("txn", mops)
        self.link.emit({"_committing": self.link.now_ns()})
        time.sleep(60)


class ProcessingConsumer(FakeClient):
    """A consumer that has polled two records and works on them: it tells the
    pool what it read (`_polled`, as the queue consumer does) and never completes."""

    def step(self):
        self.invoke("poll", [{"f": "poll"}], group="g")
        polled = [{"f": "poll", "key": 0, "offset": 3, "value": 30}, {"f": "poll", "key": 1, "offset": 5, "value": 51}]
        self.link.emit({"_polled": polled})
        time.sleep(60)


class HoldingClient(FakeClient):
    """A transactional client that tells the pool its writes are acknowledged
    (`_written`, as TxnRunner does before its hold), holds, asks to commit
    and completes, each phase long enough to be seen from outside."""

    def step(self):
        mops = self.plans.sends(1)
        self.invoke("txn", mops)
        time.sleep(0.3)
        self.link.emit({"_written": self.link.now_ns()})
        time.sleep(0.6)
        self.link.emit({"_committing": self.link.now_ns()})
        time.sleep(0.6)
        self.complete("ok", [dict(m, offset=1) for m in mops])
        time.sleep(0.6)


class JvmHolder(FakeClient):
    """A client on Kafka's Java client (its spec's options name the library): it builds a
    producer, which starts the process's JVM without reaching any broker, and idles."""

    def start(self):
        super().start()
        from workloads.kafka_client import Producer

        self.producer = Producer({"bootstrap.servers": "127.0.0.1:9", "client.id": "gregor-holder"})

    def step(self):
        time.sleep(0.05)


class WindowedCopier(FakeClient):
    """A copier that tells the pool it enters its window (`_window`, as
    workloads/eos.py does between its two commits), stays there, then leaves."""

    def step(self):
        self.link.emit({"_window": self.link.now_ns()})
        time.sleep(0.5)
        self.link.emit({"_window": None})
        time.sleep(0.5)
