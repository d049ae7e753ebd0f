"""The drain in a child process: a wedged or dead child is read again.

A real lab and real signals: the first drain child is stopped (SIGSTOP)
in the middle of its reads, as a client wedged inside librdkafka would be,
or killed (SIGKILL), as one that crashed would be; the controller must give
it up, close the op it had open, and finish the drain with a new child
under the next process id.
"""

import json
import os
import signal
import threading
import time

import pytest
from test_lab_runs import alive, client_pids, gregor_run

from ground.paths import clients_dir
from workloads.drain import OffsetsLearned
from workloads.guarded_drain import guarded_drain
from workloads.history_writer import HistoryWriter


@pytest.fixture(scope="module")
def lab(first_backend_lab):
    return first_backend_lab


def highest_offsets(history: list[dict]) -> dict[int, int]:
    """Per key, the highest offset a send or poll learned (as `gregor run`
    computes the drain's targets; a commit's offsets are positions)."""
    learned = OffsetsLearned()
    for event in history:
        learned.observe(event)
    return learned.highest


def read_lines(path) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def signal_first_drain_child_once_it_polls(lab_name: str, history, process: int, signum: int, stopped: list) -> None:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pids = client_pids(lab_name)
        if (
            pids
            and os.path.exists(history)
            and any(e["process"] == process and e["f"] == "poll" for e in read_lines(history))
        ):
            os.kill(pids[0], signum)
            stopped.append(pids[0])
            return
        time.sleep(0.05)


@pytest.mark.lab
@pytest.mark.parametrize("signum, why", [(signal.SIGSTOP, "hung"), (signal.SIGKILL, "died")], ids=["stopped", "killed"])
def test_a_wedged_or_dead_drain_child_is_given_up_and_the_keys_are_read_again(lab, tmp_path, signum, why):
    run_dir, test, history, _ = gregor_run(
        lab, tmp_path / "store", "queue", "--concurrency", "2", "--rate", "50", seconds=4
    )
    targets = highest_offsets(history)
    assert targets, "the run acknowledged no sends"
    short_key = min(targets)
    targets[short_key] += 1000  # a log that ends below its target: the drain waits out the grace
    assert client_pids(lab.name) == []
    drained = tmp_path / "drain.jsonl"
    writer = HistoryWriter(str(drained))
    stopped: list[int] = []
    watcher = threading.Thread(
        target=signal_first_drain_child_once_it_polls, args=(lab.name, drained, 1000, signum, stopped), daemon=True
    )
    watcher.start()
    result = guarded_drain(
        writer,
        test["keys"],
        lab.bootstrap_servers,
        targets,
        1000,
        "read_committed",
        60,
        lab.name,
        progress=None,
        hang_s=3,
    )
    writer.close()
    watcher.join(timeout=5)
    events = read_lines(drained)

    assert stopped, "the first drain child never polled"
    assert [(a["process"], a["why"]) for a in result.get("abandoned", [])] == [(1000, why)], result
    if why == "hung":
        assert result["abandoned"][0]["silent_s"] >= 3
    else:
        assert result["abandoned"][0]["exit_code"] == -signal.SIGKILL
    assert result["process"] == 1001 and result["complete"] is True, result
    assert set(result.get("truncated", {})) == {str(short_key)}, (targets, result)
    # the signalled child is gone, and nothing is left in the registry
    assert not alive(stopped[0])
    assert client_pids(lab.name) == [] or not os.path.isdir(clients_dir(lab.name))
    # every op of the killed child is closed; its open one as info
    for process in (1000, 1001):
        own = [e for e in events if e["process"] == process]
        kinds = [e["type"] == "invoke" for e in own]
        assert kinds == [True, False] * (len(own) // 2), f"process {process}: {own[-4:]}"
    if result["abandoned"][0]["in"] is not None:
        last = [e for e in events if e["process"] == 1000][-1]
        assert last["type"] == "info" and last["error"] == why and last["f"] == result["abandoned"][0]["in"]
    # the new child read every key up to its target again, from the beginning
    read = highest_offsets([e for e in events if e["process"] == 1001 and e["f"] == "poll"])
    for key, target in targets.items():
        if key != short_key:
            assert read.get(key, -1) >= target, (key, target, read.get(key))
    indices = [e["index"] for e in events]
    assert indices == list(range(len(events)))
    times = [e["time"] for e in events if e["process"] == 1001]
    assert times == sorted(times) and times[0] > 0


def test_a_drain_child_that_cannot_start_fails_the_drain_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("GREGOR_CLIENTS_DIR", str(tmp_path / "clients"))
    writer = HistoryWriter(str(tmp_path / "history.jsonl"))
    with pytest.raises(RuntimeError, match="the drain's client failed: KafkaException.*no.such.setting"):
        guarded_drain(
            writer,
            {"0": ["t", 0]},
            "127.0.0.1:1",
            {0: 5},
            7,
            "read_committed",
            10,
            "gregor-test-no-lab",
            progress=None,
            client_config={"no.such.setting": "1"},
        )
    writer.close()
    assert client_pids("gregor-test-no-lab") == []
