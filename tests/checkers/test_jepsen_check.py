"""A Jepsen Kafka history is imported and checked like our own, and our
history is exported back to Jepsen's form through the CLI."""

import pytest

from checkers import edn
from checkers.check import check_dir
from checkers.edn import kw
from checkers.jepsen_import import import_jepsen
from harness.cli import main

pytestmark = pytest.mark.spark

# Value 2 on key 0 was acknowledged at offset 1 but no poll returned it, while
# offset 2 was read: a lost write. Value 9 on key 1 was read although its
# transaction failed: an aborted read.
HISTORY = """
[{:type :invoke, :f :assign, :value [0 1], :process 0, :time 1, :index 0}
 {:type :ok, :f :assign, :value [0 1], :process 0, :time 2, :index 1}
 {:type :invoke, :f :send, :value [[:send 0 1] [:send 0 2] [:send 0 3]], :process 1, :time 3, :index 2}
 {:type :ok, :f :send, :value [[:send 0 [0 1]] [:send 0 [1 2]] [:send 0 [2 3]]], :process 1, :time 4, :index 3}
 {:type :invoke, :f :txn, :value [[:send 1 9]], :process 2, :time 5, :index 4}
 {:type :fail, :f :txn, :value [[:send 1 9]], :process 2, :time 6, :index 5, :error :abort}
 {:type :invoke, :f :poll, :value [[:poll]], :process 0, :time 7, :index 6}
 {:type :ok, :f :poll, :value [[:poll {0 [[0 1] [2 3]], 1 [[0 9]]}]], :process 0, :time 8, :index 7}]
"""


def test_imported_jepsen_history_is_checked_and_exported_back(spark, tmp_path):
    src = tmp_path / "history.edn"
    src.write_text(HISTORY)
    run = tmp_path / "run"
    import_jepsen(str(src), str(run))
    results = check_dir(run, spark, progress=lambda *_: None)
    lost = results["anomalies"]["lost-write"]
    assert lost["allowed"] is False
    assert [(e["key"], e["value"]) for e in lost["examples"]] == [(0, 2)]
    aborted = results["anomalies"]["aborted-read"]
    assert [(e["key"], e["value"]) for e in aborted["examples"]] == [(1, 9)]
    assert results["verdict"] == "invalid"

    assert main(["export", str(run), "--format", "jepsen", "--out", str(tmp_path / "back.edn")]) == 0
    back = list(edn.iter_history(str(tmp_path / "back.edn")))
    assert len(back) == 8
    assert back[3][kw("value")] == [[kw("send"), 0, [0, 1]], [kw("send"), 0, [1, 2]], [kw("send"), 0, [2, 3]]]
    assert back[7][kw("value")] == [[kw("poll"), {0: [[0, 1], [2, 3]], 1: [[0, 9]]}]]
