"""zombie-write under transaction protocol v2 (KIP-890), where the epoch grows with every
transaction: each txn completion carries the epoch it ran under (Kafka's Java client
4.x on brokers with transaction.version=2), and every init of a newer instance bumps
the epoch above all the older instance ever used. The checker must find the fenced
instance's late commit, and must not take an instance's own later transactions (a
higher epoch than another instance's earlier init) for zombies.

Events get time = 1000 * their index (checker_histories.write_run).
"""

from __future__ import annotations

import pytest
from txn_events import flatten, op, poll, send
from txn_histories import init

from checkers import txn
from checkers.load import load

pytestmark = pytest.mark.spark


def zombies(spark, tmp_path, write_run, events):
    found = txn.find(load(write_run(tmp_path, events), spark)).collect()
    return [(r["name"], r["key"], r["value"], r["ops"]) for r in found]


def txn_op(process, epoch, value, commit_time, offset=None, type="ok"):
    """One transaction of instance `process` sending `value` to key 0, at `epoch`."""
    fields = {} if type == "ok" else {"error": "PRODUCER_FENCED"}
    return op(
        process,
        "txn",
        [send(0, value, offset)],
        type=type,
        txn_id="a",
        producer_id=7,
        epoch=epoch,
        commit_time=commit_time,
        **fields,
    )


def reader(*values_at):
    return op(2, "poll", [poll(0, offset, value) for offset, value in values_at])


def v2_handover(late_commit_time: int, late_type: str = "fail"):
    """p0 runs three transactions at epochs 0, 1, 2; its partner p1 inits at epoch 4 (the
    coordinator bumps from 3, where p0's last commit left it), completing at index 9 (time
    9000); p0's fourth transaction (epoch 3) commits at `late_commit_time`, written at
    offset 6 when it is `ok`; p1 runs transactions at epochs 4 and 5."""
    late_offset = 6 if late_type == "ok" else None
    return flatten(
        init(0, 0),  # 0, 1
        txn_op(0, 0, 1, 2500, 0),  # 2, 3
        txn_op(0, 1, 3, 4500, 2),  # 4, 5
        txn_op(0, 2, 5, 6500, 4),  # 6, 7
        init(1, 4),  # 8, 9
        txn_op(0, 3, 7, late_commit_time, late_offset, late_type),  # 10, 11
        txn_op(1, 4, 9, 12500, 8),  # 12, 13
        txn_op(1, 5, 11, 14500, 10),  # 14, 15
    )


def test_no_zombie_when_each_instance_commits_in_its_own_time_under_v2(spark, tmp_path, write_run):
    """Every epoch the new instance's transactions carry (4, 5) is above the old instance's
    init (0), and the old instance's late transaction was fenced (fail) and never read."""
    events = flatten(v2_handover(10500), reader((0, 1), (2, 3), (4, 5), (8, 9), (10, 11)))
    assert zombies(spark, tmp_path, write_run, events) == []


def test_a_fenced_instance_committing_after_the_newer_init_is_a_zombie_under_v2(spark, tmp_path, write_run):
    events = flatten(v2_handover(10500, "ok"), reader((0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)))
    assert zombies(spark, tmp_path, write_run, events) == [("zombie-write", 0, 7, [11, 9])]


def test_a_transaction_before_the_newer_init_is_no_zombie_whatever_its_epoch(spark, tmp_path, write_run):
    """p0's fourth transaction (epoch 3) committed at 8500, before p1's init completed (9000)."""
    events = flatten(v2_handover(8500, "ok"), reader((0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)))
    assert zombies(spark, tmp_path, write_run, events) == []


def test_the_handover_back_fences_the_partner_whose_epochs_grew_past_the_first_init(spark, tmp_path, write_run):
    """p1's transactions ran at epochs 4 and 5, above p0's first init (0); p0 inits again
    (epoch 6) and p1's transaction at epoch 5, committed after that and read, is a zombie."""
    events = flatten(
        v2_handover(10500)[:14],  # up to p1's transaction at epoch 4
        init(0, 6),  # 14, 15
        txn_op(1, 5, 11, 16500, 10),  # 16, 17: its commit comes after p0's second init
        reader((0, 1), (2, 3), (4, 5), (8, 9), (10, 11)),
    )
    assert zombies(spark, tmp_path, write_run, events) == [("zombie-write", 0, 11, [17, 15])]
