"""eos-duplicate and eos-lost on a copier group, each against the same run without it."""

from __future__ import annotations

import pytest
from txn_histories import op_ids, op_with_value, valid_run

from checkers import eos
from checkers.load import load

pytestmark = pytest.mark.spark


def found(spark, tmp_path, write_run, events):
    return [
        (r["name"], r["key"], r["value"], r["offset"], r["values"], r["ops"])
        for r in eos.find(load(write_run(tmp_path, events), spark)).collect()
    ]


def test_eos_duplicate_names_the_input_and_both_outputs(spark, tmp_path, write_run):
    events = valid_run(copier_duplicates=True)
    copies = sorted([op_with_value(events, 101), op_with_value(events, 102)])
    assert found(spark, tmp_path, write_run, events) == [("eos-duplicate", 0, 1, 0, [101, 102], copies)]


def test_eos_lost_names_the_uncopied_input_below_the_commit(spark, tmp_path, write_run):
    events = valid_run(copier_skips_v7=True)
    committing = op_ids(events, group="c")[1]
    assert found(spark, tmp_path, write_run, events) == [
        ("eos-lost", 0, 7, 2, None, [op_with_value(events, 7), committing])
    ]


def test_copier_that_copied_everything_has_no_eos_anomaly(spark, tmp_path, write_run):
    assert found(spark, tmp_path, write_run, valid_run()) == []


def test_transactional_consumer_without_derived_outputs_is_no_copier(spark, tmp_path, write_run):
    """A txn op that polls through a group and commits its offsets, but writes
    nothing derived from what it read, copies nothing: no eos-lost."""
    from txn_events import commit, flatten, op, poll, send

    events = flatten(
        op(0, "txn", [send(0, 1, 0), send(0, 2, 1)], txn_id="w", commit_time=1),
        op(1, "txn", [poll(0, 0, 1), poll(0, 1, 2), send(1, 9, 0), commit(0, 2)], txn_id="r", group="t", commit_time=2),
    )
    assert found(spark, tmp_path, write_run, events) == []
    # the same op with its send derived from an input it read is a copier that lost value 2
    events[3]["mops"][2]["from"] = [0, 1]
    assert [row[:4] for row in found(spark, tmp_path, write_run, events)] == [("eos-lost", 0, 2, 1)]


def test_check_dir_reports_eos_duplicate_from_its_lane(spark, tmp_path, write_run):
    """eos runs on the second lane of `gregor check`: its count, examples,
    progress line and the partition it names reach results.json."""
    from checkers.check import check_dir

    events = valid_run(copier_duplicates=True)
    said = []
    result = check_dir(write_run(tmp_path, events), spark=spark, progress=said.append)
    entry = result["anomalies"]["eos-duplicate"]
    assert entry["count"] == 1 and not entry["allowed"]
    assert [(e["key"], e["value"], e["values"]) for e in entry["examples"]] == [(0, 1, [101, 102])]
    assert any(line.startswith("  eos: 1 instance(s) in ") for line in said)
    assert result["verdict"] == "invalid" and "0" in result["partitions"]
