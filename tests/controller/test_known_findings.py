"""An instance is shown to be the reproduced sequence-reuse finding only when the brokers'
batches show exactly its mechanism (harness/controller/known_findings.py), and the report
says so beside it (reports/evidence.py)."""

import copy

import pytest

from harness.controller.known_findings import SEQUENCE_REUSE, explain
from reports.evidence import known_finding

WRITER = {
    "index": 11,
    "process": 0,
    "type": "ok",
    "f": "txn",
    "mops": [{"f": "send", "key": 0, "value": 8, "offset": 2}],
    "producer_id": 2,
    "epoch": 0,
}
RESULTS = {"anomalies": {"unseen": {"count": 1, "examples": [{"key": 0, "value": 8, "offset": 2, "ops": [11]}]}}}
KEYS = {"0": ["t", 0]}
ABORTED = {
    "base_offset": 2,
    "last_offset": 2,
    "producer_id": 2,
    "producer_epoch": 0,
    "base_sequence": 1,
    "transactional": True,
    "control": False,
    "records": [{"offset": 2, "value": "4"}],
}
MARKER = {
    "base_offset": 3,
    "last_offset": 3,
    "producer_id": 2,
    "producer_epoch": 0,
    "transactional": True,
    "control": True,
    "marker": "ABORT",
}


def evidence(*batches):
    return {"nodes": {"n1": {"replicas": {"t-0": {"batches": list(batches)}}}}}


def test_an_unseen_write_acknowledged_at_an_aborted_record_of_its_own_producer_is_the_finding():
    (shown,) = explain([WRITER], RESULTS, KEYS, evidence(ABORTED, MARKER))
    assert shown["finding"] == SEQUENCE_REUSE and shown["report"].startswith("docs/findings/")
    assert (shown["key"], shown["value"], shown["offset"], shown["aborted_at"], shown["base_sequence"]) == (
        0,
        8,
        2,
        3,
        1,
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda batch, marker, writer: marker.update(marker="COMMIT"),  # the record there was committed
        lambda batch, marker, writer: batch["records"].append({"offset": 2, "value": "8"}),  # it is the write itself
        lambda batch, marker, writer: batch.update(producer_epoch=1),  # another epoch
        lambda batch, marker, writer: batch.update(producer_id=7),  # another producer
        lambda batch, marker, writer: batch.update(transactional=False),
        lambda batch, marker, writer: batch.update(base_offset=5, last_offset=5),  # nothing holds the offset
        lambda batch, marker, writer: writer.update(type="info"),  # the write's op did not say ok
        lambda batch, marker, writer: writer.pop("producer_id"),  # the op does not say its producer
    ],
)
def test_anything_short_of_the_exact_mechanism_is_not_the_finding(change):
    batch, marker, writer = copy.deepcopy(ABORTED), copy.deepcopy(MARKER), copy.deepcopy(WRITER)
    change(batch, marker, writer)
    assert explain([writer], RESULTS, KEYS, evidence(batch, marker)) == []


def test_without_the_brokers_batches_nothing_is_explained():
    assert explain([WRITER], RESULTS, KEYS, {}) == []


def test_the_report_names_the_finding_beside_its_instance_and_escapes_what_it_prints():
    shown = explain([WRITER], RESULTS, KEYS, evidence(ABORTED, MARKER))
    shown[0]["node"] = "<script>n1</script>"
    line = known_finding({"known_findings": shown}, {"key": 0, "value": 8})
    assert SEQUENCE_REUSE in line and "ABORT at 3" in line and "<script>" not in line
    assert known_finding({"known_findings": shown}, {"key": 0, "value": 9}) == ""
