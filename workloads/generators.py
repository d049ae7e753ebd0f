"""Seeded, reproducible operation plans: what each client does next.

Generators are values, not threads (as in Jepsen): a client asks its plan for
the next op and performs it. The same seed, slot and generation always give
the same sequence of plans, so a run is reproducible as far as the cluster's
own nondeterminism allows. Values are unique per key across the whole run:
value = slot + stride * (base + n), where slot is the client's slot (unique),
stride the number of slots, and base separates the OS processes that have
served one slot (a replaced client starts a fresh block of a billion).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

GENERATION_BLOCK = 1_000_000_000


def rng_for(seed: int, slot: int, generation: int) -> random.Random:
    """The random source of one client process; independent of other slots."""
    return random.Random(f"gregor:{seed}:{slot}:{generation}")


class ValueSource:
    """Values unique across every client of a run (hence unique per key)."""

    def __init__(self, slot: int, stride: int, generation: int = 0):
        if not 0 <= slot < stride:
            raise ValueError(f"slot {slot} outside 0..{stride - 1}")
        self.slot = slot
        self.stride = stride
        self.n = generation * GENERATION_BLOCK

    def next(self) -> int:
        value = self.slot + self.stride * self.n
        self.n += 1
        return value


@dataclass(frozen=True)
class TxnPlan:
    mops: list  # [{"f": "send", "key": K, "value": V} | {"f": "poll"}]
    abort: bool  # abort on purpose instead of committing


class Plans:
    """The op plans of one client process."""

    def __init__(
        self, seed: int, slot: int, stride: int, keys: list[int], generation: int = 0, abort_ratio: float = 0.1
    ):
        if not keys:
            raise ValueError("a client needs at least one key")
        self.rng = rng_for(seed, slot, generation)
        self.values = ValueSource(slot, stride, generation)
        self.keys = list(keys)
        self.abort_ratio = abort_ratio

    @classmethod
    def for_spec(cls, spec, default_abort_ratio: float = 0.1) -> "Plans":
        """The plans of a client spec; `abort.ratio` in its options overrides the default."""
        ratio = float(spec.options.get("abort.ratio", default_abort_ratio))
        return cls(spec.seed, spec.slot, spec.stride, spec.keys, spec.generation, abort_ratio=ratio)

    def sends(self, batch: int) -> list[dict]:
        """A batch of sends, each to a random key with a fresh value."""
        return [{"f": "send", "key": self.rng.choice(self.keys), "value": self.values.next()} for _ in range(batch)]

    def txn(self, max_mops: int = 4, polls: bool = True) -> TxnPlan:
        """1..max_mops micro-ops mixing sends to several keys and polls."""
        count = self.rng.randint(1, max_mops)
        mops = []
        for _ in range(count):
            if polls and self.rng.random() < 0.3:
                mops.append({"f": "poll"})
            else:
                mops.append({"f": "send", "key": self.rng.choice(self.keys), "value": self.values.next()})
        if not any(m["f"] == "send" for m in mops):
            mops.append({"f": "send", "key": self.rng.choice(self.keys), "value": self.values.next()})
        return TxnPlan(mops, self.rng.random() < self.abort_ratio)

    def output(self) -> int:
        """A fresh value for an output a copier decides during an op."""
        return self.values.next()


class Pacer:
    """Spaces ops at `rate` per second (0 or None: as fast as possible)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next_at = time.monotonic()

    def wait(self, deadline: float) -> bool:
        """Sleeps until the next op is due; False if that is past the deadline."""
        if self.interval:
            now = time.monotonic()
            if self.next_at > now:
                if self.next_at >= deadline:
                    return False
                time.sleep(self.next_at - now)
            # Never bank more than one interval of debt: no bursts after a pause.
            self.next_at = max(self.next_at, time.monotonic() - self.interval) + self.interval
        return time.monotonic() < deadline
