"""The final drain in a child process, started again when its client wedges.

A consumer call can block for good inside librdkafka: the test suite once
saw the drain's `position()` not return for over 7 minutes (Tansu over
PostgreSQL), and librdkafka has open reports of lock-order deadlocks between
its own threads (confluentinc/librdkafka#5476). confluent-kafka holds
Python's GIL through `position()`, so a drain in the controller's own
process would hang the whole run with nothing left to stop it.

So the drain (workloads/drain.py) runs in a child process like any client:
spawned, killed with the controller, listed in the lab's client registry.
It sends its events over a pipe, stamped with its own times, and beats
between consumer calls. A child silent for `hang_s` is killed, and one
that dies (a crash inside librdkafka) is buried; either way the op it had
open gets an `info` completion (nobody knows what it did), and a new child,
under the next process id, reads every key again from the beginning, within
what is left of the time limit. test.json's `drain.abandoned` lists those
children. A Python error in the child (a bad client setting) fails the
drain with its message instead: reading again would meet it again.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from ground.signals import signal_client
from workloads import kafka_client
from workloads.client import enter_child
from workloads.client_registry import register_client, unregister_client
from workloads.completions import info_completion
from workloads.drain import drain

HANG_S = 30.0  # a beat comes at least every 2.5 s (a consume, or one watermark query)
RETRY_MIN_S = 5.0  # a new child needs time to assign and read
EXIT_WAIT_S = 10.0  # a child closes its consumer after its result; closing may hang too


class _PipeWriter:
    """The child's side of the history: stamps times as HistoryWriter does
    (the monotonic clock is shared by all processes) and sends events."""

    def __init__(self, conn, start_ns: int):
        self.conn = conn
        self.start_ns = start_ns

    def record(self, event: dict) -> dict:
        event = {"time": time.monotonic_ns() - self.start_ns, **event}
        self.conn.send(event)
        return event


def drain_main(conn, args: dict, parent_pid: int) -> None:
    """Entry point of the drain's child process."""
    enter_child(parent_pid, args.get("log_path"))
    sent_behind = None

    def beat(waiting: dict) -> None:
        nonlocal sent_behind
        if waiting != sent_behind:
            sent_behind = dict(waiting)
            conn.send({"_behind": sent_behind})
        else:
            conn.send({"_alive": True})

    start_ns = args.pop("start_ns")
    kafka_client.use(args.pop("library"), args.pop("library_version"), on_jvm=lambda pid: conn.send({"_jvm": pid}))
    try:
        drain(
            _PipeWriter(conn, start_ns),
            **args,
            progress=lambda line: conn.send({"_progress": line}),
            beat=beat,
            report=lambda result: conn.send({"_result": result}),
        )
    except BaseException as exc:  # handed to the controller, which raises it
        conn.send({"_error": f"{type(exc).__name__}: {exc}"})
    finally:
        kafka_client.release()


class _Attempt:
    """One child: what it recorded, what it had open, how it ended."""

    def __init__(self, process: int):
        self.process = process
        self.pending: dict | None = None
        self.records = 0
        self.open_f: str | None = None  # the op it had open when it was given up on
        self.behind: dict | None = None
        self.result: dict | None = None
        self.error: str | None = None  # a Python error in the child: the drain fails
        self.abandoned: str | None = None  # given up on: "hung" (silent, killed) or "died"
        self.how: str = ""  # the same, said for the progress line
        self.detail: dict = {}  # silent_s (hung) or exit_code (died)
        self.jvms: list[int] = []  # the JVMs it started (Kafka's Java client), listed in the registry


def guarded_drain(
    writer,
    key_map: dict,
    bootstrap: str,
    targets: dict[int, int],
    process: int,
    isolation: str,
    time_limit_s: float,
    lab_name: str,
    progress=print,
    log_path: str | None = None,
    client_config: dict | None = None,
    hang_s: float = HANG_S,
    library: str = kafka_client.LIBRDKAFKA,
    library_version: str | None = None,
) -> dict:
    """workloads.drain.drain in a child process, with a new child for a
    wedged one; returns the test.json "drain" field."""
    started = time.monotonic()
    deadline = started + time_limit_s
    mp = multiprocessing.get_context("spawn")
    abandoned: list[dict] = []
    records = 0
    behind = {k: o for k, o in targets.items() if str(k) in key_map or k in key_map}
    while True:
        args = {
            "key_map": key_map,
            "bootstrap": bootstrap,
            "targets": targets,
            "process": process,
            "isolation": isolation,
            "time_limit_s": max(deadline - time.monotonic(), 0.0),
            "log_path": log_path,
            "client_config": client_config,
            "start_ns": writer.start_ns,
            "library": library,
            "library_version": library_version,
        }
        attempt = _run_child(mp, writer, args, lab_name, progress, hang_s, deadline)
        if attempt.error is not None:
            raise RuntimeError(f"the drain's client failed: {attempt.error}")
        if attempt.result is not None:
            result = dict(
                attempt.result,
                time_limit_s=time_limit_s,
                seconds=round(time.monotonic() - started, 3),
                records=records + attempt.result["records"],
            )
            break
        records += attempt.records
        behind = attempt.behind if attempt.behind is not None else behind
        abandoned.append({"process": process, "why": attempt.abandoned, "in": attempt.open_f, **attempt.detail})
        left = deadline - time.monotonic()
        again = left >= RETRY_MIN_S
        if progress:
            progress(
                f"drain: client process {process} {attempt.how}"
                f"{' inside ' + attempt.open_f if attempt.open_f else ''}; "
                + (
                    f"reading every key again as process {process + 1} ({left:.0f} s left)"
                    if again
                    else "no time left to read again"
                )
            )
        if not again:
            result = {
                "time_limit_s": time_limit_s,
                "complete": False,
                "process": process,
                "seconds": round(time.monotonic() - started, 3),
                "records": records,
                "behind": {str(k): o for k, o in sorted(behind.items())},
            }
            break
        process += 1
    if abandoned:
        result["abandoned"] = abandoned
    return result


def _run_child(mp, writer, args: dict, lab_name: str, progress, hang_s: float, deadline: float) -> _Attempt:
    attempt = _Attempt(args["process"])
    parent, child = mp.Pipe(duplex=False)
    proc = mp.Process(
        target=drain_main, args=(child, args, os.getpid()), name=f"gregor-drain-{attempt.process}", daemon=True
    )
    proc.start()
    child.close()
    register_client(lab_name, proc.pid)
    try:
        heard = time.monotonic()
        while attempt.result is None and attempt.error is None:
            if parent.poll(0.2):
                try:
                    message = parent.recv()
                except (EOFError, OSError):
                    proc.join(EXIT_WAIT_S)
                    attempt.abandoned, attempt.how = "died", f"died (exit code {proc.exitcode})"
                    attempt.detail = {"exit_code": proc.exitcode}
                    break
                heard = time.monotonic()
                _take(attempt, writer, message, progress)
                if "_jvm" in message:
                    register_client(lab_name, message["_jvm"])
                continue
            silent = time.monotonic() - heard
            if silent > hang_s or time.monotonic() > deadline + hang_s:
                attempt.abandoned = "hung"
                attempt.how = (
                    f"was silent for {silent:.1f} s and was killed"
                    if silent > hang_s
                    else f"was still reading {hang_s:g} s after the time limit and was killed"
                )
                attempt.detail = {"silent_s": round(silent, 1)}
                break
        if attempt.result is not None:
            proc.join(EXIT_WAIT_S)
    finally:
        if proc.is_alive():
            signal_client(proc.pid, signal.SIGKILL)  # also a stopped process; with its JVM, if any
        proc.join()
        for pid in [proc.pid, *attempt.jvms]:
            unregister_client(lab_name, pid)
        parent.close()
    if attempt.abandoned and attempt.pending is not None:  # it may have happened: unknown
        attempt.open_f = attempt.pending["f"]
        writer.record(info_completion(attempt.pending, attempt.abandoned))
        attempt.pending = None
    return attempt


def _take(attempt: _Attempt, writer, message: dict, progress) -> None:
    """Handles one message of the child: an event to record, or news."""
    if "_result" in message:
        attempt.result = message["_result"]
    elif "_error" in message:
        attempt.error = message["_error"]
    elif "_progress" in message:
        if progress:
            progress(message["_progress"])
    elif "_jvm" in message:
        attempt.jvms.append(message["_jvm"])
    elif "_behind" in message:
        attempt.behind = {int(k): o for k, o in message["_behind"].items()}
    elif "_alive" not in message:
        recorded = writer.record(message)
        attempt.pending = recorded if recorded["type"] == "invoke" else None
        if recorded["type"] == "ok" and recorded["f"] == "poll":
            attempt.records += sum(1 for mop in recorded.get("mops") or () if "key" in mop)
