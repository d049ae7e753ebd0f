"""The `group` workload: a consumer group under forced rebalances.

Producers feed the keys; the other clients are members of one consumer
group (subscribe) committing manually after processing, or by auto commit
(recorded from on_commit as commit ops with "auto": true). The workload's
conductor pauses a member past session.timeout.ms (the group evicts it and
rebalances; on resume it finds itself fenced) or kills it (it continues as
a new process), alternately.
"""

from __future__ import annotations

import random

from workloads import queue
from workloads.conductor import Conductor

MIN_CONCURRENCY = 3


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    producers = max(1, concurrency // 3)
    return [{"role": "producer", "keys": keys} for _ in range(producers)] + [
        {"role": "member", "keys": keys, "group": True, "options": {"subscribe": True}}
        for _ in range(concurrency - producers)
    ]


def make_client(spec, link):
    if spec.role == "producer":
        return queue.ProducerClient(spec, link)
    return queue.ConsumerClient(spec, link)


class GroupConductor(Conductor):
    """Alternately pauses a member past its session timeout and kills one."""

    def __init__(
        self,
        faults,
        members: list[int],
        seed: int,
        session_timeout_s: float,
        every_s: float = 4.0,
        deadline: float | None = None,
    ):
        super().__init__(faults, "group-conductor", deadline)
        self.members = members
        self.rng = random.Random(f"group:{seed}")
        self.pause_s = session_timeout_s + 2.0
        self.every_s = every_s

    def run(self) -> None:
        if not self.members:
            return
        turn = 0
        # the first fault waits a session timeout: a member paused before the group first
        # assigned it keys is no member yet, and its pause would evict nothing
        first = self.pause_s - 2.0
        while self.sleep(first + self.every_s * (0.5 + self.rng.random())):
            first = 0.0
            slot = self.rng.choice(self.members)
            if not self.room_for(self.pause_s + 1.0 if turn % 2 == 0 else 3.0):
                break
            if turn % 2 == 0:
                if self.faults.pause(slot, "rebalance: past session.timeout.ms"):
                    if not self.sleep(self.pause_s):
                        break
                    self.faults.resume(slot, "rebalance")
            else:
                self.faults.kill(slot, "rebalance: member killed")
            turn += 1
