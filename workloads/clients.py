"""Client processes: one OS process per logical client, one history writer.

Each client runs `client_main` in its own process (multiprocessing, spawn
context), so a nemesis can SIGSTOP it or start it inside a network namespace
of its own. It sends its events over its own pipe (a paused client stalls
only its own pipe); the controller's `ClientPool` reads every pipe and hands
the events to the single HistoryWriter. Clients stamp event times on the
system-wide monotonic clock (CLOCK_MONOTONIC is shared by all processes).

A client killed by the pool gets an `info` completion for its pending op
(written by the pool on its behalf: nobody knows what it did) and is
respawned under a new process id (old + concurrency) and a new generation of
values. Children die with the controller (PR_SET_PDEATHSIG) and are listed
in a registry so the next run or `lab down` kills any left behind, paused or
not.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field, replace

from ground.paths import clients_dir
from ground.procfs import proc_stat
from workloads.context import ClientInfo

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


def enter_child(parent_pid: int, log_path: str | None) -> None:
    """What every child of the controller does first: die with it, leave
    Ctrl-C to it, and send its stderr (librdkafka's complaints) to its log."""
    _die_with_parent(parent_pid)
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
    try:
        conn.send({"_done": True})
    except (BrokenPipeError, OSError):
        pass


# -- the controller side ---------------------------------------------------------


def _start_time(pid: int) -> str | None:
    stat = proc_stat(pid)
    return str(stat[1]) if stat else None


def registry_dir(lab_name: str) -> str:
    return str(clients_dir(lab_name))


def register_client(lab_name: str, pid: int) -> None:
    """Lists a child process of the run, so that `kill_leftover_clients`
    finds it if the controller crashes before it ends."""
    started = _start_time(pid)
    if started is None:
        return
    os.makedirs(registry_dir(lab_name), exist_ok=True)
    with open(os.path.join(registry_dir(lab_name), str(pid)), "w") as handle:
        handle.write(started)


def unregister_client(lab_name: str, pid: int) -> None:
    try:
        os.unlink(os.path.join(registry_dir(lab_name), str(pid)))
    except FileNotFoundError:
        pass


def kill_leftover_clients(lab_name: str, progress=None) -> int:
    """SIGKILLs client processes a crashed run of this lab left (paused or not).

    For `gregor run` (before it starts) and `gregor lab down`. A registry
    entry whose pid now belongs to another process (other start time) is
    only forgotten.
    """
    directory = registry_dir(lab_name)
    killed = 0
    if not os.path.isdir(directory):
        return 0
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        try:
            pid = int(entry)
            with open(path) as handle:
                started = handle.read().strip()
        except (ValueError, OSError):
            continue
        if _start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)  # delivered to stopped processes too
                killed += 1
            except ProcessLookupError:
                pass
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if killed and progress:
        progress(f"killed {killed} client process(es) left by a crashed run")
    return killed


@dataclass
class _Live:
    spec: ClientSpec
    proc: multiprocessing.Process
    conn: object
    process: int  # current logical id
    pending: dict | None = None  # last invoke without completion
    committing: int | None = None  # commit_time, once the pending txn op asked Kafka to commit
    written: int | None = None  # when the pending txn op's writes were all acknowledged
    polled: list | None = None  # poll mops the pending op received, told before it processed them
    polled_at: float = 0.0  # time.monotonic() when it told them
    done: bool = False


def unknown_outcome_mops(invoke_mops: list[dict]) -> list[dict]:
    """The mops of a completion whose client died mid-op: its sends stay
    listed (offset unknown); a bare `{"f": "poll"}` goes, because a completion
    has one poll mop per record read and nothing is known to have been read."""
    return [dict(mop) for mop in invoke_mops if not (mop.get("f") == "poll" and "key" not in mop)]


def info_completion(invoked: dict, why: str, polled: list | None = None, committing: int | None = None) -> dict:
    """The `info` completion the controller records for an op whose client
    was killed or died inside it: nobody knows what it did. The records it
    had received (`polled`) are read (docs/HISTORY.md: a completion's polls
    list the records received before the failure)."""
    event = {"process": invoked["process"], "type": "info", "f": invoked["f"]}
    if "mops" in invoked:
        event["mops"] = unknown_outcome_mops(invoked["mops"]) + list(polled or [])
    for name in ("keys", "txn_id", "group", "resend"):
        if name in invoked:
            event[name] = invoked[name]
    if committing is not None:
        event["commit_time"] = committing
    event["error"] = why
    return event


def left_open_sends(completion: dict | None) -> list[dict]:
    """The sends a replacement may send again (--resend) after its predecessor
    was killed inside this op: all of them, unless the op is a transaction
    that had already asked Kafka to commit (`commit_time`). Such a transaction
    was not left open: the replacement's init_transactions does not abort it,
    it may well have committed, and sending its writes again would make a
    second copy that no transactional guarantee is about."""
    if completion is None or completion.get("commit_time") is not None:
        return []
    return sends_of(completion)


def sends_of(event: dict | None) -> list[dict]:
    """An op's sends as fresh send mops (key and value only), to send again."""
    return [
        {"f": "send", "key": m["key"], "value": m["value"]}
        for m in (event or {}).get("mops") or ()
        if m.get("f") == "send"
    ]


def with_unperformed_sends(done: list[dict], invoke_mops: list[dict]) -> list[dict]:
    """A completion's mops: what the op did, then every send of its invoke it
    never got to (docs/HISTORY.md: a completion repeats its invoke's sends, also
    for `fail` and `info`; a fenced instance's unsent writes are exactly what
    a zombie-write check looks for)."""
    performed = {(m.get("key"), m.get("value")) for m in done if m.get("f") == "send"}
    rest = [dict(m) for m in invoke_mops if m.get("f") == "send" and (m.get("key"), m.get("value")) not in performed]
    return list(done) + rest


class ClientPool:
    """Spawns the client processes and feeds their events to the writer."""

    def __init__(self, writer, lab_name: str, observe=None, log=print, resend: bool = False):
        self.writer = writer
        self.lab_name = lab_name
        self.resend = resend  # a replacement first sends again its predecessor's unsure sends
        self.observe = observe  # called with every recorded client event
        self.log = log
        self.mp = multiprocessing.get_context("spawn")
        self.live: dict[int, _Live] = {}
        self.lock = threading.RLock()
        self.requests: queue.Queue = queue.Queue()
        self.max_process = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="client-pool", daemon=True)
        os.makedirs(registry_dir(lab_name), exist_ok=True)
        self._thread.start()

    # -- public, thread-safe ----------------------------------------------
    def spawn(self, spec: ClientSpec) -> None:
        """Starts a client (from the pool thread, so PDEATHSIG ties it to the run)."""
        self._call(lambda: self._spawn(spec))

    def send(self, slot: int, message) -> None:
        with self.lock:
            live = self.live.get(slot)
            if live and not live.done:
                try:
                    live.conn.send(message)
                except (BrokenPipeError, OSError):
                    pass

    def pid(self, slot: int) -> int | None:
        with self.lock:
            live = self.live.get(slot)
            return live.proc.pid if live else None

    def process_of(self, slot: int) -> int | None:
        with self.lock:
            live = self.live.get(slot)
            return live.process if live else None

    def kill_and_replace(self, slot: int) -> tuple[int, int]:
        """SIGKILLs a client and respawns its slot as a new process; (old, new) ids."""
        return self._call(lambda: self._kill_and_replace(slot))

    def kill_process(self, process: int) -> tuple[int, int]:
        """kill_and_replace by history process id (the nemesis's client kill)."""
        with self.lock:
            slots = [slot for slot, live in self.live.items() if live.process == process and not live.done]
        if not slots:
            raise LookupError(f"no live client process {process}")
        return self.kill_and_replace(slots[0])

    def pending(self, slot: int) -> dict | None:
        """The invoke of the op the client has in flight, or None."""
        with self.lock:
            live = self.live.get(slot)
            return live.pending if live and not live.done else None

    def writes_acknowledged(self, slot: int) -> bool:
        """Whether the client's txn op in flight has had all its writes
        acknowledged and not yet asked to commit: its transaction is open."""
        with self.lock:
            live = self.live.get(slot)
            return bool(
                live
                and not live.done
                and live.pending is not None
                and live.written is not None
                and live.committing is None
            )

    def pending_sends(self, slot: int) -> list[dict]:
        """The sends of the op the client has in flight (key and value), if any."""
        with self.lock:
            live = self.live.get(slot)
            pending = live.pending if live else None
        return sends_of(pending)

    def infos(self) -> list[ClientInfo]:
        now = time.monotonic()
        with self.lock:
            return [
                ClientInfo(
                    process=live.process,
                    pid=live.proc.pid,
                    role=live.spec.role,
                    txn_id=live.spec.txn_id,
                    group=live.spec.group,
                    place=live.spec.place.name if live.spec.place is not None else None,
                    busy_s=now - live.polled_at if live.polled is not None and live.pending else None,
                )
                for live in self.live.values()
                if not live.done
            ]

    def alive(self) -> int:
        with self.lock:
            return sum(1 for live in self.live.values() if not live.done)

    def stop_all(self, grace_s: float = 20.0) -> None:
        """Asks every client to stop, resumes paused ones, kills stragglers."""
        with self.lock:
            lives = list(self.live.values())
        for live in lives:
            self.send(live.spec.slot, "stop")
            try:
                os.kill(live.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace_s
        while time.monotonic() < end and self.alive():
            time.sleep(0.05)
        self._call(self._kill_rest)
        self._stop.set()
        self._thread.join(timeout=10)

    # -- the pool thread ---------------------------------------------------
    def _call(self, fn):
        if threading.current_thread() is self._thread:
            return fn()
        box: dict = {}
        done = threading.Event()
        self.requests.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def _serve(self) -> None:
        while not self._stop.is_set():
            while True:
                try:
                    fn, box, done = self.requests.get_nowait()
                except queue.Empty:
                    break
                try:
                    box["result"] = fn()
                except BaseException as exc:  # handed back to the caller
                    box["error"] = exc
                done.set()
            with self.lock:
                conns = {live.conn: live for live in self.live.values() if not live.done}
            if not conns:
                time.sleep(0.02)
                continue
            for conn in multiprocessing.connection.wait(list(conns), timeout=0.02):
                self._drain_conn(conns[conn])
        # answer requests that raced with the stop
        while True:
            try:
                fn, box, done = self.requests.get_nowait()
            except queue.Empty:
                break
            box["error"] = RuntimeError("client pool stopped")
            done.set()

    def _drain_conn(self, live: _Live, limit: int = 500) -> None:
        for _ in range(limit):
            try:
                if not live.conn.poll(0):
                    return
                event = live.conn.recv()
            except (EOFError, OSError):
                self._finished(live)
                return
            self._handle(live, event)
            if live.done:
                return

    def _handle(self, live: _Live, event: dict) -> None:
        if "_process" in event:
            with self.lock:
                live.process = event["_process"]
                self.max_process = max(self.max_process, live.process)
            return
        if "_log" in event:
            self.log(event["_log"].rstrip())
            return
        if "_done" in event:
            self._finished(live)
            return
        if "_committing" in event:
            live.committing = event["_committing"]
            return
        if "_written" in event:
            live.written = event["_written"]
            return
        if "_polled" in event:
            live.polled, live.polled_at = event["_polled"], time.monotonic()
            return
        recorded = self.writer.record(event)
        live.pending = recorded if recorded["type"] == "invoke" else None
        live.committing = live.polled = live.written = None
        if self.observe:
            self.observe(recorded)

    def _finished(self, live: _Live) -> None:
        live.done = True
        live.proc.join(timeout=5)
        if live.pending is not None:
            self._complete_for(live, "exited")
        unregister_client(self.lab_name, live.proc.pid)

    def _complete_for(self, live: _Live, why: str) -> dict:
        """Records `info` for the op a dead client left open (it may have happened)."""
        recorded = self.writer.record(info_completion(live.pending, why, live.polled, live.committing))
        live.pending = None
        live.committing = live.polled = live.written = None
        if self.observe:
            self.observe(recorded)
        return recorded

    def _spawn(self, spec: ClientSpec) -> None:
        parent, child = self.mp.Pipe(duplex=True)
        proc = self.mp.Process(
            target=client_main, args=(spec, child, os.getpid()), name=f"gregor-client-{spec.slot}", daemon=True
        )
        proc.start()
        child.close()
        register_client(self.lab_name, proc.pid)
        with self.lock:
            self.live[spec.slot] = _Live(spec, proc, parent, spec.process)
            self.max_process = max(self.max_process, spec.process)

    def _kill_and_replace(self, slot: int) -> tuple[int, int]:
        live = self.live[slot]
        closed = self._kill(live, "killed")
        unsure = left_open_sends(closed) if self.resend else []
        new_process = live.process + live.spec.stride
        extra = dict(live.spec.extra)
        extra.pop("resend", None)
        if unsure:
            extra["resend"] = unsure
        spec = replace(live.spec, process=new_process, generation=live.spec.generation + 1, extra=extra)
        self._spawn(spec)
        return live.process, new_process

    def _kill(self, live: _Live, why: str) -> dict | None:
        """SIGKILL; returns the `info` completion written for its open op, if any."""
        if live.done:
            return None
        try:
            os.kill(live.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        live.proc.join(timeout=10)
        # what it sent before dying is real: record it, then close its op
        while True:
            try:
                if not live.conn.poll(0):
                    break
                event = live.conn.recv()
            except (EOFError, OSError):
                break
            if "_done" in event:
                continue
            self._handle(live, event)
        live.done = True
        closed = self._complete_for(live, why) if live.pending is not None else None
        unregister_client(self.lab_name, live.proc.pid)
        return closed

    def _kill_rest(self) -> None:
        for live in list(self.live.values()):
            if not live.done:
                self._drain_conn(live, limit=100000)
            if not live.done:
                self.log(f"client {live.process} did not stop; killing it")
                self._kill(live, "killed-at-stop")
