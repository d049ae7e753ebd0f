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


# ------------------------------------------------------------ copiers that commit with `commit` ops
# A feeder (process 0) writes inputs 1 and 2 to key 0; copiers of group "c"
# poll them, write outputs to key 2 (`from` the input) in a transaction and
# commit their read position with a `commit` op, before (commit-before) or
# after (commit-after) the transaction; a verifier (process 1) reads key 2.


def _feed():
    from txn_events import flatten, op, send

    return flatten(op(0, "send", [send(0, 1, 0)]), op(0, "send", [send(0, 2, 1)]))


def _copy(process, inputs, outputs, type="ok", **fields):
    """A copier's poll op, then its output transaction (outputs: (value, offset, input value))."""
    from txn_events import flatten, op, poll, send

    txn_fields = dict(txn_id=f"copier-{process % 4}", group="c", **fields)
    if type == "ok":
        txn_fields["commit_time"] = 1
    else:
        txn_fields["error"] = "killed"
    return flatten(
        op(process, "poll", [poll(0, offset, value) for offset, value in inputs], group="c"),
        op(
            process,
            "txn",
            [send(2, value, offset if type == "ok" else None, source=(0, source)) for value, offset, source in outputs],
            type=type,
            **txn_fields,
        ),
    )


def _commit(process, offset):
    from txn_events import commit, op

    return op(process, "commit", [commit(0, offset)], group="c")


def _verify(*outputs):
    from txn_events import op, poll

    return op(1, "poll", [poll(2, offset, value) for value, offset in outputs])


def _commit_after(copied_twice: bool):
    """Copier 2 copies both inputs, then dies before its commit op when
    `copied_twice`; copier 6 then reads from the group's old position and
    copies them again."""
    from txn_events import flatten

    first = _copy(2, [(0, 1), (1, 2)], [(101, 0, 1), (102, 1, 2)])
    if not copied_twice:
        return flatten(_feed(), first, _commit(2, 2), _verify((101, 0), (102, 1)))
    again = _copy(6, [(0, 1), (1, 2)], [(103, 3, 1), (104, 4, 2)])
    return flatten(_feed(), first, again, _commit(6, 2), _verify((101, 0), (102, 1), (103, 3), (104, 4)))


def _commit_before(dies: bool):
    """Copier 2 polls both inputs and commits its position before copying;
    when `dies`, it is killed inside the transaction, whose outputs nobody
    ever reads (it aborted), and copier 6 goes on from the committed position."""
    from txn_events import flatten, op

    if not dies:
        polled = _copy(2, [(0, 1), (1, 2)], [(101, 0, 1), (102, 1, 2)])
        return flatten(_feed(), polled[:2], _commit(2, 2), polled[2:], _verify((101, 0), (102, 1)))
    killed = _copy(2, [(0, 1), (1, 2)], [(101, 0, 1), (102, 1, 2)], type="info")
    return flatten(_feed(), killed[:2], _commit(2, 2), killed[2:], op(6, "poll", [], group="c"), _verify())


def _found(spark, tmp_path, write_run, events, isolation="read_committed"):
    from checker_histories import base_test

    test = base_test(client={"isolation.level": isolation})
    t = load(write_run(tmp_path, events, test), spark)
    return sorted((r["name"], r["key"], r["value"]) for r in eos.find(t).collect())


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_commit_after_the_output_copies_an_input_twice(spark, tmp_path, write_run, isolation):
    found = _found(spark, tmp_path / "twice", write_run, _commit_after(copied_twice=True), isolation)
    assert found == [("eos-duplicate", 0, 1), ("eos-duplicate", 0, 2)]
    assert _found(spark, tmp_path / "once", write_run, _commit_after(copied_twice=False), isolation) == []


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_commit_before_the_output_loses_an_input_never_copied(spark, tmp_path, write_run, isolation):
    found = _found(spark, tmp_path / "dies", write_run, _commit_before(dies=True), isolation)
    assert found == [("eos-lost", 0, 1), ("eos-lost", 0, 2)]
    assert _found(spark, tmp_path / "lives", write_run, _commit_before(dies=False), isolation) == []


def test_a_read_uncommitted_read_of_an_info_output_proves_no_copy(spark, tmp_path, write_run):
    """A copier killed inside its transaction; the verifier read its output
    and the next copier copied the input again. Read committed, the read
    proves the killed transaction committed: a second copy. Read
    uncommitted, it may have aborted: one copy, neither anomaly."""
    from txn_events import flatten

    killed = _copy(2, [(0, 1)], [(101, None, 1)], type="info")
    events = flatten(
        _feed(),
        killed,
        _copy(6, [(0, 1), (1, 2)], [(102, 1, 1), (103, 2, 2)]),
        _commit(6, 2),
        _verify((101, 0), (102, 1), (103, 2)),
    )
    assert _found(spark, tmp_path / "rc", write_run, events) == [("eos-duplicate", 0, 1)]
    assert _found(spark, tmp_path / "ru", write_run, events, "read_uncommitted") == []


def test_a_group_that_commits_without_deriving_outputs_is_no_copier(spark, tmp_path, write_run):
    """A consumer group committing with `commit` ops, whose sends carry no `from`, copies nothing."""
    from txn_events import flatten, op, poll, send

    events = flatten(
        _feed(),
        op(2, "poll", [poll(0, 0, 1), poll(0, 1, 2)], group="c"),
        op(2, "send", [send(2, 101, 0)], group="c"),
        _commit(2, 2),
        _verify((101, 0)),
    )
    t = load(write_run(tmp_path, events), spark)
    assert not eos.applies(t)
    sent = next(e for e in events if e["f"] == "send" and e["type"] == "ok" and e["process"] == 2)
    sent["mops"][0]["from"] = [0, 1]  # now an output of input 1: a copier that lost input 2
    t = load(write_run(tmp_path / "copier", events), spark)
    assert eos.applies(t)
    assert sorted((r["name"], r["value"]) for r in eos.find(t).collect()) == [("eos-lost", 2)]


def test_the_pass_gives_eos_only_the_inputs_a_join_can_still_find_something_about(spark, tmp_path, write_run):
    """Input 1 is copied by an aborted transaction, then again with input 2
    by an `ok` one that commits the group's position past both: one copy
    each, no anomaly. The pass keeps back what eos no longer needs to join:
    input 1 has two derived sends (EOS_POS, a candidate for a second copy),
    and neither input is below the commit uncopied by an `ok` op (no EOS_REC)."""
    from collections import Counter

    from txn_events import flatten

    from checkers import passes
    from checkers.keypass import EOS_COUNT, EOS_INFO_OUT, EOS_OUT, EOS_POS, EOS_REC, EOS_UNPROVEN

    events = flatten(
        _feed(),
        _copy(2, [(0, 1)], [(101, None, 1)], type="fail"),
        _copy(6, [(0, 1), (1, 2)], [(102, 1, 1), (103, 2, 2)]),
        _commit(6, 2),
        _verify((102, 1), (103, 2)),
    )
    t = load(write_run(tmp_path, events), spark)
    try:
        assert eos.find(t).collect() == []
        main = passes.main(t)
        tags = Counter(row["tag"] for row in main.select("tag").collect())
        assert (tags[EOS_OUT], tags[EOS_POS], tags[EOS_REC], tags[EOS_INFO_OUT] + tags[EOS_UNPROVEN]) == (2, 1, 0, 0)
        [candidate] = main.where(f"tag = {EOS_POS}").select("key", "value", "offset").collect()
        assert tuple(candidate) == (0, 1, 0)
        counts = [(r["a"], r["b"], r["c"]) for r in passes.small(t)[EOS_COUNT]]
        assert [sum(column) for column in zip(*counts)] == [1, 0, 0]
    finally:
        t.release()
