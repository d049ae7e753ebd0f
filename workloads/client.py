"""One client process: what it is given, its pipe, and the loop it runs.

Each client runs `client_main` in its own process (multiprocessing, spawn
context), so a nemesis can SIGSTOP it or start it inside a network namespace
of its own. It sends its events over its own pipe (a paused client stalls
only its own pipe) to the controller's ClientPool (client_pool.py), which
hands them to the single history writer. Clients stamp event times on the
system-wide monotonic clock (CLOCK_MONOTONIC is shared by all processes).
After an unknown outcome a client continues as a new process id (old +
concurrency). Children die with the controller (PR_SET_PDEATHSIG).

Each client leads a process group of its own: on Kafka's Java client the
group holds its JVM too (workloads/java_client/jvm.py), so that a pause or a
kill of the client, which signal the group (ground/signals.py), acts on the
JVM exactly as on a librdkafka client's one process. The client's library
(`kafka_client.use`) is chosen before its workload builds anything, and
after it has entered its network place, so the JVM starts inside it.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import time
import traceback
from dataclasses import dataclass, field

from workloads import kafka_client
from workloads.completions import unknown_outcome_mops

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ClientSpec:
    """Everything a client process needs; picklable."""

    slot: int
    process: int
    role: str  # producer, consumer, txn, zombie, feeder, copier, verifier, member
    module: str  # workloads.<name> providing make_client(spec, link)
    stride: int  # number of slots (= concurrency): process id step
    seed: int
    keys: list  # the keys this client works on
    key_map: dict  # key -> [topic, partition] (str keys, as in test.json)
    bootstrap: str
    options: dict  # workload options (acks, batch, isolation, ...)
    start_ns: int  # monotonic ns of the test start
    deadline: float  # time.monotonic() at which the main phase ends
    rate: float = 0.0  # ops/s for this client (0: unpaced)
    generation: int = 0
    txn_id: str | None = None
    group: str | None = None
    place: object = None  # ground.protocols.ClientPlace: a network place of its own
    extra: dict = field(default_factory=dict)
    log_path: str | None = None  # where the client's stderr (librdkafka's log) goes
    client_config: dict = field(default_factory=dict)  # --client-config (security); never recorded


class Link:
    """The client's side of its pipe: events out, control messages in."""

    def __init__(self, conn, spec: ClientSpec):
        self.conn = conn
        self.spec = spec
        self.stopping = False
        self.inbox: list = []

    def now_ns(self) -> int:
        return time.monotonic_ns() - self.spec.start_ns

    def emit(self, event: dict) -> None:
        self.conn.send(event)

    def check_control(self) -> None:
        """Reads pending control messages ("stop", or workload commands)."""
        while self.conn.poll(0):
            msg = self.conn.recv()
            if msg == "stop":
                self.stopping = True
            else:
                self.inbox.append(msg)

    def running(self) -> bool:
        self.check_control()
        return not self.stopping and time.monotonic() < self.spec.deadline


class Client:
    """Base of every workload client: one op at a time, honest completions."""

    def __init__(self, spec: ClientSpec, link: Link):
        self.spec = spec
        self.link = link
        self.process = spec.process
        self.pending: dict | None = None
        self.needs_reset = False

    # -- recording -------------------------------------------------------
    def invoke(self, f: str, mops: list | None = None, **extra) -> dict:
        assert self.pending is None, "one process never has two ops in flight"
        event = {"time": self.link.now_ns(), "process": self.process, "type": "invoke", "f": f}
        if mops is not None:
            event["mops"] = mops
        event.update(extra)
        self.link.emit(event)
        self.pending = event
        return event

    def complete(self, type_: str, mops: list | None = None, error: str | None = None, **extra) -> dict:
        invoked = self.pending
        assert invoked is not None, "completion without invoke"
        event = {"time": self.link.now_ns(), "process": self.process, "type": type_, "f": invoked["f"]}
        if mops is not None:
            event["mops"] = mops
        for name in ("keys", "txn_id", "group", "resend"):
            if name in invoked and name not in extra:
                event[name] = invoked[name]
        event.update(extra)
        if error is not None:
            event["error"] = error
        self.pending = None
        self.link.emit(event)
        if type_ == "info":
            self.crashed()
        return event

    def crashed(self) -> None:
        """After an unknown outcome the client continues as a new process.

        Its Kafka clients are replaced by the main loop (not here: this runs
        deep inside an op, possibly inside start()).
        """
        self.process += self.spec.stride
        self.link.emit({"_process": self.process})
        self.needs_reset = True

    # -- to override -----------------------------------------------------
    def start(self) -> None:
        """Opens Kafka clients (may record assign/subscribe/init ops)."""

    def step(self) -> None:
        """Performs one op (or waits briefly when there is nothing to do)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Drops Kafka clients after a crash; start() opens new ones."""
        self.close()
        self.start()

    def close(self) -> None:
        """Closes Kafka clients."""


def _pending_mops(client: Client) -> list | None:
    """The mops of an op a client abandons: its sends, nothing read."""
    mops = client.pending.get("mops")
    return None if mops is None else unknown_outcome_mops(mops)


def _die_with_parent(parent_pid: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl
        os._exit(1)


def lead_process_group() -> None:
    """Makes this process the leader of a process group of its own, which every process
    it starts (a JVM) joins. Until it has, a signal for it reaches it alone (ground/signals.py)."""
    try:
        os.setpgid(0, 0)
    except OSError:  # already a group leader
        pass


def enter_child(parent_pid: int, log_path: str | None) -> None:
    """What every child of the controller does first: die with it, lead its own process
    group, leave Ctrl-C to the controller, and send its stderr (librdkafka's complaints,
    the JVM's) to its log."""
    _die_with_parent(parent_pid)
    lead_process_group()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller decides when to stop
    if log_path:
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)


def client_main(spec: ClientSpec, conn, parent_pid: int) -> None:
    """Entry point of a client process."""
    enter_child(parent_pid, spec.log_path)
    link = Link(conn, spec)
    client = None
    try:
        if spec.place is not None:
            spec.place.enter()
        kafka_client.use(
            spec.options.get("library", kafka_client.LIBRDKAFKA),
            spec.options.get("library.version"),
            on_jvm=lambda pid: link.emit({"_jvm": pid}),
        )
        module = importlib.import_module(spec.module)
        client = module.make_client(spec, link)
        started = False
        while link.running():
            try:
                if client.needs_reset:
                    client.needs_reset = False
                    client.reset()
                    started = True
                elif not started:
                    started = True
                    client.start()
                else:
                    client.step()
            except (BrokenPipeError, EOFError):
                raise
            except Exception as exc:  # a client bug or an unexpected library error
                link.emit({"_log": f"client {client.process} crashed: {exc!r}\n" + traceback.format_exc(limit=3)})
                if client.pending is not None:
                    client.complete("info", _pending_mops(client), error=type(exc).__name__)
                else:
                    client.crashed()
                time.sleep(0.2)  # no hot loop when the cluster keeps refusing
        if client.pending is not None:  # stopped mid-op by a bug path: never leave it open
            client.complete("info", _pending_mops(client), error="stopped")
    except (BrokenPipeError, EOFError):
        os._exit(0)  # the controller is gone
    finally:
        try:
            if client is not None:
                client.close()
        except Exception:
            pass
        kafka_client.release()
    try:
        conn.send({"_done": True})
    except (BrokenPipeError, OSError):
        pass
