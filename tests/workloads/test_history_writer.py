"""The history writer: contiguous indices, one whole line per event, a crash leaves a prefix."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from workloads.history_writer import HistoryWriter, read_history


def test_indices_are_contiguous_under_concurrent_writers(tmp_path):
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))

    def spam(process):
        for _ in range(500):
            writer.record({"process": process, "type": "invoke", "f": "poll"})

    threads = [threading.Thread(target=spam, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    events = read_history(str(tmp_path / "h.jsonl"))
    assert [e["index"] for e in events] == list(range(4000))


def test_a_client_stamped_time_is_kept_and_a_missing_one_is_filled(tmp_path):
    writer = HistoryWriter(str(tmp_path / "h.jsonl"))
    kept = writer.record({"time": 12345, "process": 0, "type": "invoke", "f": "send"})
    filled = writer.record({"process": "nemesis", "type": "invoke", "f": "kill"})
    writer.close()
    assert kept["time"] == 12345
    assert isinstance(filled["time"], int) and filled["time"] >= 0
    first = json.loads(open(tmp_path / "h.jsonl").readline())
    assert list(first)[:2] == ["index", "time"]


def test_a_reader_ignores_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"index": 0}\n{"index": 1, "ti')
    assert read_history(str(path)) == [{"index": 0}]


WRITER = """
import sys
from workloads.history_writer import HistoryWriter
w = HistoryWriter(sys.argv[1])
i = 0
while True:
    w.record({"process": i % 7, "type": "invoke", "f": "send",
              "mops": [{"f": "send", "key": 1, "value": i, "pad": "x" * 300}]})
    i += 1
"""


def test_sigkill_mid_write_leaves_whole_lines_and_at_most_a_torn_tail(tmp_path):
    """One write per line, but Linux may stop a write that spans a page
    boundary at the boundary when SIGKILL arrives: what is left is whole lines
    with contiguous indices, then at most one unterminated prefix of a line,
    which every reader (read_history, checkers.load.torn_tail) leaves out."""
    path = tmp_path / "h.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < 2_000_000):
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    raw = path.read_bytes()
    whole, _, tail = raw.rpartition(b"\n")
    lines = whole.splitlines()
    assert len(lines) > 1000
    assert [json.loads(line)["index"] for line in lines] == list(range(len(lines)))
    assert len(tail) < max(len(line) for line in lines) + 20, "more than one line after the last newline"
    assert tail == b"" or tail.startswith(b'{"index":%d,' % len(lines))
    assert [event["index"] for event in read_history(str(path))] == list(range(len(lines)))
