"""offset-commit-loss: a group commits past a record none of its members read in an ok op."""

from __future__ import annotations

import pytest
from txn_events import commit, flatten, op, poll, send
from txn_histories import op_ids, op_with_value, valid_run

from checkers import groups
from checkers.load import load

pytestmark = pytest.mark.spark


def found(spark, tmp_path, write_run, events):
    return [
        (r["name"], r["key"], r["value"], r["offset"], r["ops"])
        for r in groups.find(load(write_run(tmp_path, events), spark)).collect()
    ]


def test_offset_commit_loss_names_the_skipped_record(spark, tmp_path, write_run):
    events = valid_run(group_misses_v8=True)
    committing = op_ids(events, f="commit", group="g")[0]
    assert found(spark, tmp_path, write_run, events) == [
        ("offset-commit-loss", 1, 8, 2, [op_with_value(events, 8), committing])
    ]


def test_group_that_read_everything_it_committed_loses_nothing(spark, tmp_path, write_run):
    assert found(spark, tmp_path, write_run, valid_run()) == []


def test_reads_of_failed_polls_do_not_count(spark, tmp_path, write_run):
    """Only the failed poll saw value 2; the commit to offset 1 loses it."""
    events = flatten(
        op(0, "send", [send(0, 1, 0)]),
        op(0, "send", [send(0, 2, 2)]),
        op(1, "poll", [poll(0, 0, 1)], group="g"),
        op(1, "poll", [poll(0, 2, 2)], type="fail", group="g", error="BROKEN"),
        op(1, "commit", [commit(0, 3)], group="g"),
    )
    assert [(n, k, v, o) for n, k, v, o, _ in found(spark, tmp_path, write_run, events)] == [
        ("offset-commit-loss", 0, 2, 2)
    ]


def test_records_at_or_above_the_committed_position_are_not_lost(spark, tmp_path, write_run):
    events = flatten(
        op(0, "send", [send(0, 1, 0)]),
        op(0, "send", [send(0, 2, 2)]),
        op(1, "poll", [poll(0, 0, 1)], group="g"),
        op(1, "commit", [commit(0, 2)], group="g"),
    )
    assert found(spark, tmp_path, write_run, events) == []
