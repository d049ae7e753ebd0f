"""ClientPool: real OS processes feeding one writer; renames, kills, pauses."""

import os
import signal
import threading
import time
from dataclasses import replace

from history_rules import problems
from polling import wait_until

from workloads.client import ClientSpec
from workloads.client_pool import ClientPool
from workloads.client_registry import registry_dir
from workloads.completions import unknown_outcome_mops
from workloads.history_writer import HistoryWriter, read_history

KEYS = {"0": ["t", 0], "1": ["t", 1]}
TEST = {"keys": KEYS, "concurrency": 3}


def specs(start_ns, seconds):
    deadline = time.monotonic() + seconds
    return [
        ClientSpec(
            slot=s,
            process=s,
            role="producer",
            module="fake_clients",
            stride=3,
            seed=1,
            keys=[0, 1],
            key_map=KEYS,
            bootstrap="unused",
            options={},
            start_ns=start_ns,
            deadline=deadline,
        )
        for s in range(3)
    ]


def run_pool(tmp_path, seconds, during=None, wait_for_exit=True):
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None)
    for spec in specs(writer.start_ns, seconds):
        pool.spawn(spec)
    if during:
        during(pool)
    end = time.monotonic() + (seconds + 10 if wait_for_exit else seconds)
    while time.monotonic() < end:
        time.sleep(0.05)
        if all(s.proc.exitcode is not None for s in pool.live.values()):
            break
    pool.stop_all(grace_s=5)
    writer.close()
    return pool, read_history(str(tmp_path / "h.jsonl"))


def test_clients_follow_the_history_rules_and_continue_as_new_processes(tmp_path):
    pool, history = run_pool(tmp_path, 6.0)
    assert problems(history, TEST) == []
    infos = [e for e in history if e["type"] == "info"]
    assert infos, "the fake client ends every seventh op info"
    processes = {e["process"] for e in history}
    assert any(p >= 3 for p in processes), "after info a client continues as old id + 3"
    assert os.listdir(registry_dir(pool.lab_name)) == []


def test_a_killed_client_gets_an_info_completion_and_a_successor(tmp_path):
    replaced = {}

    def kill_one(pool):
        time.sleep(1.5)
        replaced["ids"] = pool.kill_and_replace(1)

    pool, history = run_pool(tmp_path, 6.0, during=kill_one)
    old, new = replaced["ids"]
    assert new == old + 3
    assert problems(history, TEST) == []
    assert any(e["process"] == new for e in history)
    assert not any(
        e["process"] == old and e["index"] > min(i["index"] for i in history if i["process"] == new) for e in history
    )


def test_with_resend_a_replacement_is_given_the_sends_its_predecessor_had_in_flight(tmp_path):
    """The send hangs, so the kill lands mid-op on any machine (a fast fake op
    could complete between the look at it and the kill)."""
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None, resend=True)
    pool.spawn(replace(specs(writer.start_ns, 10.0)[0], role="sender"))
    wait_until(lambda: pool.pending(0) is not None, interval=0.01)
    in_flight = pool.pending_sends(0)
    old, new = pool.kill_process(pool.process_of(0))
    extra = dict(pool.live[0].spec.extra)
    pool.stop_all(grace_s=1)
    writer.close()
    history = read_history(str(tmp_path / "h.jsonl"))
    assert len(in_flight) == 2, "the send should be in flight when the kill lands"
    killed = [e for e in history if e["process"] == old and e.get("error") == "killed"]
    assert len(killed) == 1 and killed[0]["type"] == "info"
    assert new == old + 3, "the replacement continues as old id + stride"
    assert (
        [(m["key"], m["value"]) for m in extra["resend"]]
        == [(m["key"], m["value"]) for m in killed[0]["mops"]]
        == [(m["key"], m["value"]) for m in in_flight]
    )


def test_a_transaction_killed_after_it_asked_to_commit_is_not_resent(tmp_path):
    """It was not left open: the replacement's init does not abort it and it may
    have committed, so sending its writes again would make a second copy
    (catalogue producer-restart, safe side). Its `info` completion says when
    commit was asked for."""
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None, resend=True)
    spec = replace(specs(writer.start_ns, 10.0)[0], role="committer")
    pool.spawn(spec)
    wait_until(
        lambda: pool.live[0].committing is not None, interval=0.01
    )  # it has told the pool that it asked to commit
    ids: list = []
    killer = threading.Thread(target=lambda: ids.extend(pool.kill_process(pool.process_of(0))), daemon=True)
    killer.start()
    killer.join(timeout=20)
    assert ids, "the pool never completed the kill"
    old = ids[0]
    extra = dict(pool.live[0].spec.extra)
    pool.stop_all(grace_s=1)
    writer.close()
    history = read_history(str(tmp_path / "h.jsonl"))
    killed = [e for e in history if e["process"] == old and e.get("error") == "killed"]
    assert len(killed) == 1 and killed[0]["f"] == "txn"
    assert isinstance(killed[0].get("commit_time"), int)
    assert killed[0]["mops"], "its sends stay listed"
    assert "resend" not in extra


def test_a_transaction_counts_as_open_from_its_acknowledged_writes_until_it_asks_to_commit(tmp_path):
    """The hang conductor's `inside` moment (writes_acknowledged): seen in
    that order, once per op, and never while no op is in flight."""
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None)
    pool.spawn(replace(specs(writer.start_ns, 30.0)[0], role="holder"))
    seen: list = []
    end = time.monotonic() + 30  # two ops from whenever the client has started
    while time.monotonic() < end and seen.count((True, True)) < 2:
        state = (pool.pending(0) is not None, pool.writes_acknowledged(0))
        if not seen or seen[-1] != state:
            seen.append(state)
        time.sleep(0.01)
    pool.stop_all(grace_s=1)
    writer.close()
    assert (False, True) not in seen
    start = seen.index((True, True))
    assert seen[start - 1] == (True, False), seen  # sent, not yet acknowledged
    assert seen[start + 1 : start + 3] == [(True, False), (False, False)], seen  # committing, then done
    assert seen.count((True, True)) >= 2, seen


def test_a_copier_in_its_window_is_listed_so_until_it_leaves(tmp_path):
    """ClientInfo.window_s, what `client:copier:window` picks: set while the
    copier says it is between its two commits, None before and after."""
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None)
    pool.spawn(replace(specs(writer.start_ns, 30.0)[0], role="copier"))
    seen: list = []
    end = time.monotonic() + 30
    while time.monotonic() < end and seen.count(True) < 2:
        inside = pool.infos()[0].window_s is not None
        if not seen or seen[-1] != inside:
            seen.append(inside)
        time.sleep(0.01)
    pool.stop_all(grace_s=1)
    writer.close()
    assert seen[:4] == [False, True, False, True], seen


def test_a_consumer_killed_while_it_processes_lists_what_it_had_read(tmp_path):
    """docs/HISTORY.md: the polls of an `info` completion list the records
    received before the failure; a killed consumer cannot say so itself."""
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    pool = ClientPool(writer, f"pooltest{os.getpid()}", log=lambda m: None)
    pool.spawn(replace(specs(writer.start_ns, 10.0)[0], role="processor"))
    wait_until(lambda: pool.live[0].polled is not None, interval=0.01)  # it has told the pool what it polled
    old, _new = pool.kill_process(pool.process_of(0))
    pool.stop_all(grace_s=1)
    writer.close()
    killed = [e for e in read_history(str(tmp_path / "h.jsonl")) if e["process"] == old and e["type"] == "info"]
    assert len(killed) == 1 and killed[0]["f"] == "poll" and killed[0]["group"] == "g"
    assert killed[0]["mops"] == [
        {"f": "poll", "key": 0, "offset": 3, "value": 30},
        {"f": "poll", "key": 1, "offset": 5, "value": 51},
    ]


def test_a_paused_client_is_resumed_and_stopped_at_the_end(tmp_path):
    paused = {}

    def pause_one(pool):
        time.sleep(1.0)
        paused["pid"] = pool.pid(0)
        os.kill(paused["pid"], signal.SIGSTOP)

    pool, history = run_pool(tmp_path, 2.5, during=pause_one, wait_for_exit=False)
    assert problems(history, TEST) == []
    assert not os.path.exists(f"/proc/{paused['pid']}") or open(f"/proc/{paused['pid']}/stat").read().split()[2] == "Z"


def test_leftover_clients_are_killed_even_when_paused_and_reused_pids_are_spared(tmp_path, monkeypatch):
    import subprocess
    import sys

    from workloads.client_registry import _start_time, kill_leftover_clients

    monkeypatch.setenv("GREGOR_CLIENTS_DIR", str(tmp_path))
    lab = "leftovers"
    directory = tmp_path / lab
    directory.mkdir()
    paused = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(paused.pid, signal.SIGSTOP)
        (directory / str(paused.pid)).write_text(_start_time(paused.pid))
        (directory / str(bystander.pid)).write_text("1")  # a recycled pid: other start time
        assert kill_leftover_clients(lab) == 1
        assert paused.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
        assert list(directory.iterdir()) == []
    finally:
        for proc in (paused, bystander):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_dead_clients_completion_keeps_sends_and_drops_the_bare_poll():
    """docs/HISTORY.md: a poll that read nothing leaves no poll mop; sends stay listed."""
    invoked = [{"f": "poll"}, {"f": "send", "key": 1, "value": 7}, {"f": "commit", "key": 1, "offset": 3}]
    assert unknown_outcome_mops(invoked) == [
        {"f": "send", "key": 1, "value": 7},
        {"f": "commit", "key": 1, "offset": 3},
    ]
    assert unknown_outcome_mops([{"f": "poll"}]) == []
