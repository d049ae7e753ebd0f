"""The `zombie` workload: two producer instances per transactional.id.

Slots come in pairs sharing one transactional.id. The active instance runs
transactions (sends only, with a pause between writes and commit); the
workload's conductor SIGSTOPs it (recorded as a `pause` op of the nemesis),
tells the standby to call init_transactions (fencing the paused one), and
resumes the paused one a little later: it wakes up as a zombie, its pending
commit is fenced, and it goes standby until its turn comes again. Every init
is recorded with the producer id and epoch librdkafka reports.
"""

from __future__ import annotations

import random
import time

from workloads.clients import Client
from workloads.conductor import Conductor
from workloads.generators import Pacer, Plans
from workloads.kafka_io import KeyMap
from workloads.txn import TransactionalProducer, TxnRunner, needs_new_instance

MIN_CONCURRENCY = 2
ACTIVATE = "activate"


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    """Pairs of instances; an odd last slot is a plain transactional producer."""
    slots = []
    for i in range(concurrency):
        pair = i // 2
        slots.append({"role": "zombie", "keys": keys, "txn": True,
                      "txn_id_suffix": f"pair-{pair}",
                      "extra": {"pair": pair, "active": i % 2 == 0}})
    return slots


def make_client(spec, link):
    return ZombieClient(spec, link)


class ZombieClient(Client):
    def start(self) -> None:
        self.keymap = KeyMap(self.spec.key_map)
        if not hasattr(self, "plans"):
            self.plans = Plans.for_spec(self.spec, default_abort_ratio=0.05)
            self.pacer = Pacer(self.spec.rate)
            self.active = bool(self.spec.extra.get("active"))
        self.runner = TxnRunner(self, self.keymap)
        self.tp = None
        if self.active:
            self.activate()

    def activate(self) -> None:
        if self.tp is not None:
            self.tp.abandon()
        self.tp = TransactionalProducer(self, self.spec.txn_id)
        self.active = self.tp.init()
        if not self.active:
            self.tp.abandon()
            self.tp = None

    def close(self) -> None:
        if getattr(self, "tp", None) is not None:
            self.tp.abandon()
        self.tp = None

    def reset(self) -> None:
        self.close()
        self.active = False        # after a crash, wait for the conductor's turn

    def step(self) -> None:
        if ACTIVATE in self.link.inbox:
            self.link.inbox = [m for m in self.link.inbox if m != ACTIVATE]
            self.activate()
        if not self.active or self.tp is None:
            time.sleep(0.02)
            return
        if not self.pacer.wait(self.spec.deadline):
            time.sleep(min(0.05, max(0.0, self.spec.deadline - time.monotonic())))
            return
        plan = self.plans.txn(max_mops=3, polls=False)
        process = self.process
        done = self.runner.run(self.tp, plan.mops, plan.abort, hold_s=0.05)
        if self.process == process and needs_new_instance(done, self.tp):
            self.close()
            self.active = False


class ZombieConductor(Conductor):
    """Pauses the active instance of a pair and activates its partner."""

    def __init__(self, faults, pool, pairs: dict[int, list[int]], seed: int,
                 txn_ids: dict[int, str], hold_s: float = 2.0, every_s: float = 3.0,
                 deadline: float | None = None):
        super().__init__(faults, "zombie-conductor", deadline)
        self.pool = pool
        self.pairs = {p: slots for p, slots in pairs.items() if len(slots) == 2}
        self.active = {p: slots[0] for p, slots in self.pairs.items()}
        self.rng = random.Random(f"zombie:{seed}")
        self.txn_ids = txn_ids
        self.hold_s = hold_s
        self.every_s = every_s

    def run(self) -> None:
        if not self.pairs:
            return
        while self.sleep(self.every_s * (0.5 + self.rng.random())):
            pair = self.rng.choice(sorted(self.pairs))
            if not self.room_for(self.hold_s + 1.0):
                break
            zombie = self.active[pair]
            partner = [s for s in self.pairs[pair] if s != zombie][0]
            if not self.faults.pause(zombie, "zombie", txn_id=self.txn_ids.get(pair)):
                continue
            self.pool.send(partner, ACTIVATE)
            self.active[pair] = partner
            if not self.sleep(self.hold_s):
                break
            self.faults.resume(zombie, "zombie")
