"""The streaming pass over history.jsonl that feeds per-process timelines."""

from __future__ import annotations

import json

from reports.timeline import collect


def write_history(path, events):
    with path.open("w") as out:
        for index, event in enumerate(events):
            out.write(json.dumps({"index": index, **event}) + "\n")


def test_pairs_each_completion_with_its_process_invoke(tmp_path):
    history = tmp_path / "history.jsonl"
    write_history(
        history,
        [
            {"time": 100, "process": 0, "type": "invoke", "f": "send", "mops": [{"f": "send", "key": 1, "value": 5}]},
            {"time": 150, "process": 1, "type": "invoke", "f": "poll"},
            {
                "time": 200,
                "process": 0,
                "type": "fail",
                "f": "send",
                "error": "TIMED_OUT",
                "mops": [{"f": "send", "key": 1, "value": 5}],
            },
            {
                "time": 300,
                "process": 1,
                "type": "ok",
                "f": "poll",
                "mops": [{"f": "poll", "key": 1, "offset": 0, "value": 4}],
            },
        ],
    )
    windows = collect(history, [2], radius=5)
    assert sorted(windows.ops) == [2, 3]
    send, poll = windows.ops[2], windows.ops[3]
    assert (send.process, send.f, send.type, send.invoke_time, send.complete_time, send.error) == (
        "0",
        "send",
        "fail",
        100,
        200,
        "TIMED_OUT",
    )
    assert (poll.invoke_time, poll.complete_time) == (150, 300)
    assert poll.summary() == "poll 1=4@0"


def test_collects_only_ops_near_the_asked_ids(tmp_path):
    history = tmp_path / "history.jsonl"
    events = []
    for n in range(500):
        events.append({"time": n * 10, "process": n % 3, "type": "invoke", "f": "send"})
        events.append({"time": n * 10 + 5, "process": n % 3, "type": "ok", "f": "send"})
    write_history(history, events)
    windows = collect(history, [101, 901], radius=4)
    assert sorted(windows.ops) == [97, 99, 101, 103, 105, 897, 899, 901, 903, 905]
    assert all(op.invoke_time == op.complete_time - 5 for op in windows.ops.values())
    clusters = windows.clusters([101, 901], radius=4)
    assert [[op.op for op in group] for group in clusters] == [[97, 99, 101, 103, 105], [897, 899, 901, 903, 905]]


def test_missing_history_gives_a_note_not_an_error(tmp_path):
    windows = collect(tmp_path / "history.jsonl", [3])
    assert windows.ops == {} and "missing" in windows.note
