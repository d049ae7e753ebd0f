"""The `script` workload: one transactional producer follows a fixed script, in step with wire faults.

A reproduction needs one run, not ten: the fault must hit one request at one
moment of the client's life, not wherever a random schedule puts it. So the
client runs a fixed list of steps (--script NAME, SCRIPTS below) and the
workload's conductor, in the controller, runs the steps that act on the wire
relay (a rule on, a rule off, waiting for what a rule took to reach the
broker). At each conductor step the client tells the pool where it stands
(`_script`) and waits for the conductor's go, so the two never race.

The history is the ordinary one (docs/HISTORY.md): an `init` op per producer
instance, one `txn` op per transaction (its sends, `ok`, `fail` or `info` as
outcomes.py says), the rules as the nemesis's start-wire/stop-wire ops. Every
send goes to the run's first key, so the drain reads one partition. The
steps, and why each script exists, are in docs/SCENARIOS.md ("Reproductions").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from workloads import outcomes
from workloads.client import Client
from workloads.conductor import Conductor
from workloads.generators import ValueSource
from workloads.kafka_client import KafkaException
from workloads.kafka_io import KeyMap, encode
from workloads.txn import CALL_TIMEOUT_S, TransactionalProducer, commit

MIN_CONCURRENCY = 1
GO = "script-go"
CLIENT_STEPS = {"begin", "send", "flush", "commit", "new-instance"}
CONDUCTOR_STEPS = {"wire-on", "wire-off", "await-wire"}
GO_WAIT_S = 120.0  # the longest a conductor step may take (a hold, then its answer)
LONGEST_S = 180.0  # a scripted run's main phase, whatever --time-limit says: it ends with its script
ABORT_TRIES = 6  # of CALL_TIMEOUT_S each: past the records' own timeout (message.timeout.ms)


@dataclass(frozen=True)
class Script:
    steps: tuple  # (name,) or ("wire-on", RULE): the client's and the conductor's, in order
    about: str  # one line: what it reproduces


# Transaction steps: begin opens a `txn` op whose sends are the script's until its commit;
# flush waits for the sends so far; commit flushes, then commits (3 tries on a retriable error,
# as the txn workload does). An error inside a transaction aborts it (the op fails) and the
# script goes on after its commit step, passing through the conductor's steps on the way.
_T = (("begin",), ("send",), ("commit",))
SCRIPTS = {
    "abort-sequence-reuse": Script(
        _T
        + (("wire-on", "drop-response:api=Produce"),)
        + _T  # its flush times out (the answers never come): aborted
        + (("wire-off",),)
        + _T,  # the same instance, the same partition: committed
        "a transaction aborted after its Produce answers were lost, then the same producer's next one",
    ),
    "abort-sequence-reuse-new-instance": Script(
        _T + (("wire-on", "drop-response:api=Produce"),) + _T + (("wire-off",), ("new-instance",)) + _T,
        "the control: the same steps, with a new producer instance after the abort",
    ),
    "delayed-endtxn": Script(
        _T
        + (("wire-on", "hold:api=EndTxn:ms=20000:count=1"),)
        + _T  # its EndTxn is held; the client gives up on that request and commits on a new one
        + (("begin",), ("send",), ("flush",))  # the next transaction is open, its first write acknowledged
        + (("await-wire",), ("wire-off",))  # the held EndTxn(commit) has reached the coordinator
        + (("send",), ("send",), ("commit",)),
        "an EndTxn held past the client's timeout and delivered inside the next transaction (KAFKA-17754)",
    ),
    "late-produce": Script(
        _T
        + (("wire-on", "hold:api=Produce:ms=20000"),)
        + _T  # its Produce is held; the client gives up on it, the flush times out: aborted
        + (("await-wire",), ("wire-off",))  # the held Produce has reached the leader, after the ABORT marker
        + (("new-instance",),)  # a new epoch (and none of librdkafka's sequence reuse after an abort)
        + _T,
        "a Produce held past its transaction's abort and delivered after the ABORT marker (KAFKA-14402)",
    ),
}


def check_name(name: str) -> str:
    if name not in SCRIPTS:
        raise ValueError(f"unknown script {name!r}; the scripts are {', '.join(SCRIPTS)}")
    return name


def layout(concurrency: int, keys: list[int], options: dict) -> list[dict]:
    """One scripted client, whatever --concurrency says: a script has one producer."""
    return [{"role": "script", "keys": keys[:1], "txn": True}]


def make_client(spec, link):
    return ScriptClient(spec, link)


class ScriptClient(Client):
    """Runs its script once, then stops."""

    def start(self) -> None:
        self.keymap = KeyMap(self.spec.key_map)
        self.script = SCRIPTS[check_name(self.spec.options["script"])]
        self.values = ValueSource(self.spec.slot, self.spec.stride)
        self.key = self.spec.keys[0]
        self.tp = None
        self.open_producer()

    def open_producer(self) -> None:
        if self.tp is not None:
            self.tp.abandon()
        self.tp = TransactionalProducer(self, self.spec.txn_id)
        if not self.tp.init():
            raise RuntimeError("init_transactions failed; the script cannot go on")

    def close(self) -> None:
        if getattr(self, "tp", None) is not None:
            self.tp.abandon()
        self.tp = None

    def step(self) -> None:
        """The whole script, once: done or failed, the client then stops (a script is never
        run again from its start, as a workload's step would be after a crash)."""
        txn = None
        try:
            for index, step in enumerate(self.script.steps):
                name = step[0]
                if name in CONDUCTOR_STEPS:
                    self.wait_for_go(index)
                elif name == "new-instance":
                    self.open_producer()
                elif name == "begin":
                    self.finish_abort()
                    txn = ScriptedTxn(self, self.planned_sends(index))
                else:
                    getattr(txn, name)()
                    if name == "commit":
                        txn = None
        finally:
            self.link.stopping = True

    def finish_abort(self) -> None:
        """An abort that timed out (its in-flight records were still unanswered) is called
        again before the next transaction, as both libraries allow; it fails the script
        when it never completes."""
        for _ in range(ABORT_TRIES):
            if not self.tp.abort_pending:
                return
            try:
                self.tp.producer.abort_transaction(CALL_TIMEOUT_S)
                self.tp.abort_pending = False
            except KafkaException as exc:
                if not abort_may_be_called_again(exc):
                    raise
        if self.tp.abort_pending:
            raise RuntimeError(f"the abort did not complete in {ABORT_TRIES} tries")

    def planned_sends(self, begin: int) -> list[dict]:
        """The sends of the transaction that begins at step `begin`, each with a fresh value."""
        sends = []
        for step in self.script.steps[begin + 1 :]:
            if step[0] == "commit":
                break
            if step[0] == "send":
                sends.append({"f": "send", "key": self.key, "value": self.values.next()})
        return sends

    def wait_for_go(self, index: int) -> None:
        """Tells the pool it stands at conductor step `index`; waits for the conductor's go."""
        self.link.emit({"_script": index})
        end = time.monotonic() + GO_WAIT_S
        while time.monotonic() < end:
            self.link.check_control()
            if (GO, index) in self.link.inbox:
                self.link.inbox.remove((GO, index))
                return
            if self.link.stopping:
                raise RuntimeError(f"stopped while waiting at script step {index}")
            time.sleep(0.01)
        raise RuntimeError(f"the conductor never finished script step {index} ({GO_WAIT_S:g} s)")


def abort_may_be_called_again(exc: KafkaException) -> bool:
    """An abort that failed this way (it timed out, or a retriable error) may be called again."""
    err = outcomes.error_of(exc)
    return err is not None and (err.retriable() or err.name() == "_TIMED_OUT")


class ScriptedTxn:
    """One transaction of a script: a `txn` op from its begin to its commit (or its abort)."""

    def __init__(self, client: ScriptClient, sends: list[dict]):
        self.client, self.tp, self.planned = client, client.tp, sends
        self.done: list[dict] = []
        self.delivered: dict[int, tuple] = {}
        self.failed = False
        client.invoke("txn", [dict(m) for m in sends], txn_id=self.tp.txn_id)
        self.guarded(self.tp.producer.begin_transaction)
        self.ids = self.tp.ids()

    def guarded(self, action, phase: str = outcomes.TXN_BODY) -> None:
        """Runs one action of the transaction; on an error, aborts and fails the op."""
        if self.failed:
            return
        try:
            action()
        except (KafkaException, TimeoutError) as exc:
            self.abort_with(exc, phase)

    def send(self) -> None:
        def produce():
            mop = dict(self.planned[len(self.done)])
            self.done.append(mop)
            key, value = encode(mop["key"], mop["value"])
            where = self.client.keymap.tp(mop["key"])

            def report(err, msg, mop=mop):
                self.delivered[id(mop)] = (err, msg.offset() if err is None else None)

            self.tp.producer.produce(where.topic, value=value, key=key, partition=where.partition, on_delivery=report)

        self.guarded(produce)

    def flush(self) -> None:
        def flushed():
            remaining = self.tp.producer.flush(CALL_TIMEOUT_S)
            failed = [err for err, _ in self.delivered.values() if err is not None]
            if failed:
                raise KafkaException(failed[0])
            if remaining:
                raise TimeoutError("flush")

        self.guarded(flushed)

    def commit(self) -> None:
        self.flush()
        if self.failed:
            return
        self.fill_offsets()
        commit_time = self.client.link.now_ns()
        self.client.link.emit({"_committing": commit_time})
        exc, tried = commit(self.tp.producer)
        if exc is None:
            self.fill_offsets()
            self.client.complete("ok", self.done, commit_time=commit_time, **self.ids)
            return
        err = outcomes.error_of(exc)
        outcome = outcomes.classify(exc, outcomes.TXN_COMMIT, commit_attempted_before=tried)
        if err is not None and err.txn_requires_abort():
            self.abort()
        self.failed = True
        self.client.complete(outcome.type, self.done, error=outcome.error, commit_time=commit_time, **self.ids)

    def abort_with(self, exc, phase: str) -> None:
        self.failed = True
        self.fill_offsets()
        self.abort()
        if isinstance(exc, TimeoutError):
            exc = KafkaException(outcomes.KafkaError(outcomes.KafkaError._TIMED_OUT))
        outcome = outcomes.classify(exc, phase)
        self.client.complete(outcome.type, self.done, error=outcome.error, **self.ids)

    def abort(self) -> None:
        try:
            self.tp.producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            # timed out (records in flight): called again before the next transaction;
            # fenced or fatal: the script's next begin says so
            self.tp.abort_pending = abort_may_be_called_again(exc)

    def fill_offsets(self) -> None:
        for mop in self.done:
            err, offset = self.delivered.get(id(mop), (None, None))
            if err is None and offset is not None and offset >= 0:
                mop["offset"] = offset


class ScriptConductor(Conductor):
    """The conductor's steps of the script, each when the client stands at it."""

    def __init__(self, faults, pool, lab, test: dict, slot: int, name: str, deadline: float | None = None):
        super().__init__(faults, "script-conductor", deadline)
        self.pool, self.lab, self.test, self.slot = pool, lab, test, slot
        self.script = SCRIPTS[check_name(name)]
        self.entry: dict | None = None  # the rule switched on, until it is switched off

    def run(self) -> None:
        for index, step in enumerate(self.script.steps):
            if step[0] not in CONDUCTOR_STEPS:
                continue
            if not self.wait_for_client(index):
                return
            if step[0] == "wire-on":
                self.entry = self.faults.wire_on(self.lab, self.test.get("wire_relay"), self.slot, step[1], "script")
            elif step[0] == "wire-off":
                self.switch_off("script")
            else:
                self.await_wire()
            self.pool.send(self.slot, (GO, index))

    def wait_for_client(self, index: int) -> bool:
        while not self.halt.is_set():
            at = self.pool.script_step(self.slot)
            if at == index:
                return True
            if at is None and self.pool.pid(self.slot) is None:
                return False  # the client is gone
            time.sleep(0.01)
        return False

    def await_wire(self) -> None:
        """Until every request the rule took has reached the broker and been answered (or lost)."""
        if self.entry is None:
            return
        end = time.monotonic() + GO_WAIT_S
        while time.monotonic() < end and not self.halt.is_set():
            reports = self.lab.wire_call({"op": "report", "id": self.entry["id"]}).get("reports") or []
            events = reports[0].get("events", []) if reports else []
            if events and all(e.get("response") or e.get("lost") or e.get("response_dropped") for e in events):
                return
            time.sleep(0.05)

    def switch_off(self, why: str) -> None:
        if self.entry is not None:
            entry, self.entry = self.entry, None
            self.faults.wire_off(self.lab, entry, why)

    def stop(self) -> None:
        super().stop()
        self.switch_off("end of main phase")
