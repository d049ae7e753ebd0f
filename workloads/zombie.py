"""The `zombie` workload: two producer instances per transactional.id.

Slots come in pairs sharing one transactional.id. The active instance runs
transactions (sends only, with a pause between writes and commit); the
workload's conductor SIGSTOPs it (recorded as a `pause` op of the nemesis),
tells the standby to call init_transactions (fencing the paused one), and
resumes the paused one a little later: it wakes up as a zombie, its pending
commit is fenced, and it goes standby until its turn comes again. Every init
is recorded with the producer id and epoch librdkafka reports.

With --zombie-kind idempotent the instances are plain idempotent producers
(no transactional.id, so nothing fences a paused one: its late writes land);
with --resend the partner first sends again what the paused instance had in
flight, as a failover that takes over unfinished work does.
"""

from __future__ import annotations

import random
import time

from workloads.client import Client
from workloads.conductor import Conductor
from workloads.generators import Pacer, Plans, TxnPlan
from workloads.kafka_io import KeyMap
from workloads.queue import ProducerClient
from workloads.txn import TransactionalProducer, TxnRunner, needs_new_instance

MIN_CONCURRENCY = 2
ACTIVATE = "activate"


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    """Pairs of instances; an odd last slot is a plain transactional producer."""
    slots = []
    for i in range(concurrency):
        pair = i // 2
        slots.append(
            {
                "role": "zombie",
                "keys": keys,
                "txn": options.get("zombie.kind") != "idempotent",
                "txn_id_suffix": f"pair-{pair}",
                "extra": {"pair": pair, "active": i % 2 == 0},
            }
        )
    return slots


def make_client(spec, link):
    if spec.options.get("zombie.kind") == "idempotent":
        return IdempotentZombie(spec, link)
    return ZombieClient(spec, link)


def activation(inbox: list) -> list | None:
    """Takes an activation out of the inbox: the sends to do first (maybe none),
    or None when there is no activation."""
    for message in inbox:
        if message == ACTIVATE or (isinstance(message, tuple) and message[0] == ACTIVATE):
            inbox.remove(message)
            return list(message[1]) if isinstance(message, tuple) else []
    return None


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
        self.active = False  # after a crash, wait for the conductor's turn

    def step(self) -> None:
        unsure = activation(self.link.inbox)
        if unsure is not None:
            self.activate()
            self.unsure = unsure
        if not self.active or self.tp is None:
            time.sleep(0.02)
            return
        if not self.pacer.wait(self.spec.deadline):
            time.sleep(min(0.05, max(0.0, self.spec.deadline - time.monotonic())))
            return
        resend = bool(getattr(self, "unsure", None))
        plan = TxnPlan(self.unsure, False) if resend else self.plans.txn(max_mops=3, polls=False)
        self.unsure = []
        process = self.process
        done = self.runner.run(
            self.tp, plan.mops, plan.abort, hold_s=0.05, extra_invoke={"resend": True} if resend else None
        )
        if self.process == process and needs_new_instance(done, self.tp):
            self.close()
            self.active = False


class IdempotentZombie(ProducerClient):
    """An instance that is a plain idempotent producer: sends ops, with the
    same pause between writes and acknowledgement as a transactional one has
    between writes and commit. Standby until activated; never fenced."""

    HOLD_S = 0.05

    def start(self) -> None:
        super().start()
        if not hasattr(self, "active"):
            self.active = bool(self.spec.extra.get("active"))

    def reset(self) -> None:
        super().reset()
        self.active = False  # after a crash, wait for the conductor's turn

    def step(self) -> None:
        unsure = activation(self.link.inbox)
        if unsure is not None:
            self.close()
            super().start()  # a new producer: a new producer id, a new idempotence session
            self.active, self.unsure = True, unsure
        if not self.active:
            time.sleep(0.02)
            return
        super().step()

    def flush_wait(self) -> None:
        time.sleep(self.HOLD_S)


class ZombieConductor(Conductor):
    """Pauses the active instance of a pair and activates its partner."""

    def __init__(
        self,
        faults,
        pool,
        pairs: dict[int, list[int]],
        seed: int,
        txn_ids: dict[int, str],
        hold_s: float = 2.0,
        every_s: float = 3.0,
        deadline: float | None = None,
        resend: bool = False,
    ):
        super().__init__(faults, "zombie-conductor", deadline)
        self.pool = pool
        self.pairs = {p: slots for p, slots in pairs.items() if len(slots) == 2}
        self.active = {p: slots[0] for p, slots in self.pairs.items()}
        self.rng = random.Random(f"zombie:{seed}")
        self.txn_ids = txn_ids
        self.hold_s = hold_s
        self.every_s = every_s
        self.resend = resend

    def run(self) -> None:
        if not self.pairs:
            return
        while self.sleep(self.every_s * (0.5 + self.rng.random())):
            pair = self.rng.choice(sorted(self.pairs))
            if not self.room_for(self.hold_s + 1.0):
                break
            zombie = self.active[pair]
            partner = [s for s in self.pairs[pair] if s != zombie][0]
            txn_id = {"txn_id": self.txn_ids[pair]} if self.txn_ids.get(pair) else {}
            if not self.faults.pause(zombie, "zombie", **txn_id):
                continue
            unsure = self.pool.pending_sends(zombie) if self.resend else []
            self.pool.send(partner, (ACTIVATE, unsure) if unsure else ACTIVATE)
            self.active[pair] = partner
            if not self.sleep(self.hold_s):
                break
            self.faults.resume(zombie, "zombie")
