"""Jepsen Kafka histories import into our history format op for op."""

import json

import pytest

from checkers.jepsen_import import import_jepsen, jepsen_to_history
from ground.errors import GregorError

JEPSEN_HISTORY = """
{:type :invoke, :f :assign, :value [1 2], :process 0, :time 10, :index 0}
{:type :ok, :f :assign, :value [1 2], :process 0, :time 20, :index 1}
{:type :invoke, :f :send, :value [[:send 1 5] [:send 2 6]], :process 1, :time 30, :index 2}
{:type :info, :f :start-partition, :value :majority, :process :nemesis, :time 35, :index 3}
{:type :ok, :f :send, :value [[:send 1 [0 5]] [:send 2 [3 6]]], :process 1, :time 40, :index 4}
{:type :info, :f :start-partition, :value [:isolated {"n1" #{"n2"}}], :process :nemesis, :time 45, :index 5}
{:type :invoke, :f :poll, :value [[:poll]], :process 0, :time 50, :index 6}
{:type :ok, :f :poll, :value [[:poll {1 [[0 5]], 2 [[3 6]]}]], :process 0, :time 60, :index 7,
 :rebalance-log [{:type :revoked, :keys [2]}]}
{:type :invoke, :f :txn, :value [[:send 1 7] [:poll]], :process 2, :time 70, :index 8}
{:type :fail, :f :txn, :value [[:send 1 7] [:poll]], :process 2, :time 80, :index 9, :error [:abort "x"]}
{:type :invoke, :f :send, :value [[:send 2 8]], :process 3, :time 90, :index 10}
{:type :info, :f :send, :value [[:send 2 [nil 8]]], :process 3, :time 95, :index 11, :error :timeout}
{:type :invoke, :f :debug-topic-partitions, :value [1 2], :process 0, :time 96, :index 12}
{:type :ok, :f :debug-topic-partitions, :value {}, :process 0, :time 97, :index 13}
{:type :invoke, :f :crash, :process 4, :time 98, :index 14}
{:type :info, :f :crash, :process 4, :time 99, :index 15}
"""


def read_events(out):
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_ops_map_to_our_events(tmp_path):
    src = tmp_path / "history.edn"
    src.write_text(JEPSEN_HISTORY)
    test = import_jepsen(str(src), str(tmp_path / "run"))
    events = read_events(tmp_path / "run")
    assert [e["index"] for e in events] == list(range(len(events)))
    assert len(events) == 14  # the two debug-topic-partitions events are skipped
    assert test["import"]["skipped"] == {"f debug-topic-partitions": 2}
    assert events[0] == {
        "index": 0,
        "time": 10,
        "jepsen_index": 0,
        "process": 0,
        "type": "invoke",
        "f": "assign",
        "keys": [1, 2],
    }
    send_ok = events[4]
    assert send_ok["type"] == "ok" and send_ok["process"] == 1
    assert send_ok["mops"] == [
        {"f": "send", "key": 1, "value": 5, "offset": 0},
        {"f": "send", "key": 2, "value": 6, "offset": 3},
    ]
    assert events[2]["mops"] == [{"f": "send", "key": 1, "value": 5}, {"f": "send", "key": 2, "value": 6}]
    poll_ok = events[7]
    assert poll_ok["mops"] == [
        {"f": "poll", "key": 1, "offset": 0, "value": 5, "poll": 0},
        {"f": "poll", "key": 2, "offset": 3, "value": 6, "poll": 0},
    ]
    assert poll_ok["rebalance"] == [{"type": "revoked", "keys": [2]}]
    assert events[6]["mops"] == [{"f": "poll"}]
    assert events[9]["type"] == "fail" and events[9]["error"] == '[:abort "x"]'
    info_send = events[11]
    assert info_send["mops"] == [{"f": "send", "key": 2, "value": 8}]
    assert info_send["error"] == "timeout"
    assert [e["f"] for e in events[12:]] == ["crash", "crash"]


def test_nemesis_info_pairs_become_invoke_and_completion(tmp_path):
    src = tmp_path / "history.edn"
    src.write_text(JEPSEN_HISTORY)
    import_jepsen(str(src), str(tmp_path / "run"))
    nemesis = [e for e in read_events(tmp_path / "run") if e["process"] == "nemesis"]
    assert [e["type"] for e in nemesis] == ["invoke", "info"]
    assert nemesis[0]["value"] == {"value": "majority"}
    assert nemesis[1]["value"] == {"value": ["isolated", {"n1": ["n2"]}]}


def test_test_json_maps_keys_and_says_settings_are_assumed(tmp_path):
    src = tmp_path / "history.edn"
    src.write_text(JEPSEN_HISTORY)
    test = jepsen_to_history(str(src), str(tmp_path / "run"), client={"enable.idempotence": False})
    on_disk = json.loads((tmp_path / "run" / "test.json").read_text())
    assert on_disk == test
    assert test["keys"] == {"1": ["jepsen", 1], "2": ["jepsen", 2]}
    assert test["client"]["transactional"] is True  # a :txn op was seen
    assert test["client"]["subscribe"] is False
    assert test["client"]["enable.idempotence"] is False
    assert "assumptions" in test["import"]["note"]
    assert test["drain"] == {"complete": True}


def test_a_history_in_one_vector_of_records_imports_the_same(tmp_path):
    src = tmp_path / "history.edn"
    src.write_text("[" + JEPSEN_HISTORY.replace("{:type", "#jepsen.history.Op{:type") + "]")
    import_jepsen(str(src), str(tmp_path / "run"))
    plain = tmp_path / "plain.edn"
    plain.write_text(JEPSEN_HISTORY)
    import_jepsen(str(plain), str(tmp_path / "run2"))
    assert read_events(tmp_path / "run") == read_events(tmp_path / "run2")


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            "{:type :invoke, :f :send, :value [[:send :x 1]], :process 0, :index 7}",
            ":index 7: key :x is not an integer",
        ),
        ("{:type :invoke, :value [], :process 0, :index 3}", "missing :type or :f"),
        ("[1 2 3]", "expected Jepsen op maps"),
        ("{:type :invoke, :f :read, :process 0, :index 0}", "no Kafka workload ops"),
    ],
)
def test_histories_that_are_not_kafka_workloads_get_one_line_errors(tmp_path, text, problem):
    src = tmp_path / "history.edn"
    src.write_text(text)
    with pytest.raises(GregorError) as error:
        import_jepsen(str(src), str(tmp_path / "run"))
    assert problem in str(error.value)
    assert not (tmp_path / "run" / "history.jsonl").exists()
    assert not (tmp_path / "run" / "test.json").exists()


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(GregorError, match="no such file"):
        import_jepsen(str(tmp_path / "nope.edn"), str(tmp_path / "run"))
