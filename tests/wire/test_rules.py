"""A wire rule's limits, on requests librdkafka really sent (tests/wire/recorded); no lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.wire import frames as kf
from harness.wire.rules import Rule

RECORDING = Path(__file__).parent / "recorded" / "kafka-3.9.1" / "librdkafka.jsonl"
DEST = ("10.0.0.11", 9092)


def requests() -> list[kf.Request]:
    found = []
    for line in RECORDING.open():
        record = json.loads(line)
        if record["dir"] == "request":
            found.append(kf.parse_request(bytes.fromhex(record["hex"])))
    return found


def first(api_key: int, **wanted) -> kf.Request:
    for request in requests():
        if request.api_key == api_key and all(getattr(request, k) == v for k, v in wanted.items()):
            return request
    raise AssertionError(f"no recorded request of api {api_key}")


def test_an_api_limit_takes_that_api_only_by_name_or_key():
    end_txn, produce = first(kf.END_TXN), first(kf.PRODUCE)
    for api in ("EndTxn", "endtxn", 26, "26"):
        rule = Rule({"action": "delay", "delay_ms": 10, "api": api}, now=0.0)
        assert rule.takes(end_txn, DEST, None, 1.0)
        assert not rule.takes(produce, DEST, None, 1.0)


def test_count_stops_taking_once_spent_and_the_report_says_so():
    end_txn = first(kf.END_TXN)
    rule = Rule({"action": "hold", "delay_ms": 10, "api": "EndTxn", "count": 1}, now=0.0)
    assert rule.takes(end_txn, DEST, None, 1.0)
    rule.record({"api": "EndTxn"})
    assert not rule.takes(end_txn, DEST, None, 1.0)
    report = rule.report(1.0)
    assert (report["matched"], report["state"]) == (1, "spent")


def test_a_window_takes_only_inside_it():
    produce = first(kf.PRODUCE)
    rule = Rule({"action": "duplicate", "api": "Produce", "after_ms": 1000, "for_ms": 500}, now=100.0)
    assert not rule.takes(produce, DEST, None, 100.5)
    assert rule.takes(produce, DEST, None, 101.2)
    assert not rule.takes(produce, DEST, None, 101.5)
    assert rule.report(101.6)["state"] == "over"


def test_namespace_destination_and_transactional_id_limits():
    end_txn = first(kf.END_TXN)
    (txn_id,) = end_txn.transactional_ids
    rule = Rule({"action": "drop_response", "netns": "lab-c1", "dest": ":9092", "transactional_id": txn_id}, 0.0)
    assert rule.takes(end_txn, DEST, "lab-c1", 1.0)
    assert not rule.takes(end_txn, DEST, "lab-c2", 1.0)
    assert not rule.takes(end_txn, ("10.0.0.11", 9093), "lab-c1", 1.0)
    other = Rule({"action": "drop_response", "transactional_id": txn_id + "-not"}, 0.0)
    assert not other.takes(end_txn, DEST, None, 1.0)


def test_a_list_of_namespaces_takes_the_requests_of_each_of_them():
    markers = first(kf.END_TXN)  # the limit is the same whatever the API
    rule = Rule({"action": "delay", "delay_ms": 5, "api": "EndTxn", "netns": ["lab-n1", "lab-n3"]}, 0.0)
    assert rule.takes(markers, DEST, "lab-n1", 1.0) and rule.takes(markers, DEST, "lab-n3", 1.0)
    assert not rule.takes(markers, DEST, "lab-n2", 1.0)
    assert rule.report(1.0)["rule"]["netns"] == ["lab-n1", "lab-n3"]


def test_producer_id_limit_takes_every_request_that_names_the_producer():
    produce = next(r for r in requests() if r.api_key == kf.PRODUCE and r.producer_ids)
    (pid,) = produce.producer_ids
    assert Rule({"action": "duplicate", "producer_id": pid}, 0.0).takes(produce, DEST, None, 1.0)
    assert not Rule({"action": "duplicate", "producer_id": pid + 1}, 0.0).takes(produce, DEST, None, 1.0)


@pytest.mark.parametrize(
    "spec, says",
    [
        ({"action": "wait"}, "rule action must be one of"),
        ({"action": "delay"}, "delay needs delay_ms"),
        ({"action": "hold", "delay_ms": 5, "on": "response"}, '"on": "response" is for delay only'),
        ({"action": "delay", "delay_ms": 5, "api": "NoSuchApi"}, "unknown Kafka API"),
        ({"action": "delay", "delay_ms": 5, "colour": "red"}, "unknown rule field"),
        ({"action": "duplicate", "dest": "host:port"}, "bad destination"),
    ],
)
def test_a_bad_rule_is_refused_in_one_line(spec, says):
    with pytest.raises(ValueError) as error:
        Rule(spec, 0.0)
    assert says in str(error.value) and "\n" not in str(error.value)
