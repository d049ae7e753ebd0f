"""What the nemesis (and anything else running beside the clients) sees of a run.

Names fixed by docs/RUN-API.md: RunContext and ClientInfo.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ClientInfo:
    process: int  # logical process id in the history
    pid: int  # OS pid (SIGSTOP/SIGCONT target)
    role: str  # "producer", "consumer", "txn", "zombie", "copier", "verifier", ...
    txn_id: str | None
    group: str | None
    place: str | None  # the name of the client's own place (lab.client_place), if it has one
    busy_s: float | None = None  # how long it has worked on records its op polled (None: it is not)
    window_s: float | None = None  # how long a copier has been inside its window (None: it is not)


class RunContext:
    """The lab, the test map, the history and the live clients of one run."""

    def __init__(
        self,
        lab,
        test: dict,
        writer,
        clients: Callable[[], list[ClientInfo]],
        on_record: Callable[[dict], None] | None = None,
        kill_client: Callable[[int], tuple[int, int]] | None = None,
    ):
        self.lab = lab
        self.kill_client = kill_client  # process id -> (old, new): SIGKILL and replace (nemesis kill)
        self._on_record = on_record
        self.test = test
        self._writer = writer
        self._clients = clients
        # The history has one process "nemesis", and one process never has two
        # ops in flight: whoever records a fault (the nemesis, a workload's
        # conductor) holds this from its invoke to its completion.
        self.nemesis_op = threading.Lock()

    def record(self, event: dict) -> dict:
        """Appends an event (thread-safe); fills index and time."""
        recorded = self._writer.record(event)
        if self._on_record is not None:
            self._on_record(recorded)
        return recorded

    def now_ns(self) -> int:
        return self._writer.now_ns()

    def clients(self) -> list[ClientInfo]:
        return list(self._clients())

    def txn_ids(self) -> list[str]:
        return sorted({c.txn_id for c in self.clients() if c.txn_id})

    def group_ids(self) -> list[str]:
        return sorted({c.group for c in self.clients() if c.group})
