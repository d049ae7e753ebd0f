"""The seeded plan and the option syntax."""

import argparse
import itertools

import pytest

from ground.errors import GregorError
from nemesis.options import add_nemesis_arguments
from nemesis.schedule import parse_faults, parse_targets, plan


def take(n, **kw):
    return list(itertools.islice(plan(**kw), n))


def test_same_seed_same_plan_other_seed_other_plan():
    kw = dict(faults=["partition", "pause", "kill", "netem"], targets=["one", "leader", "client"], interval_s=5)
    assert take(30, seed=1, **kw) == take(30, seed=1, **kw)
    assert take(30, seed=1, **kw) != take(30, seed=2, **kw)


def test_plan_uses_every_fault_and_keeps_client_targets_to_partitions_and_pauses():
    steps = take(300, faults=["partition", "pause", "kill", "netem"], targets=["one", "client"], seed=3, interval_s=2)
    assert {s.fault for s in steps} == {"partition", "pause", "kill", "netem"}
    assert {s.fault for s in steps if s.target == "client"} == {"partition", "pause"}
    assert all(s.profile for s in steps if s.fault == "netem")
    assert all(1.0 <= s.quiet_s <= 3.0 and 1.0 <= s.hold_s <= 3.0 for s in steps)


def test_partition_shapes_follow_the_target():
    steps = take(400, faults=["partition"], targets=["one", "minority", "all", "client"], seed=5, interval_s=1)
    shapes = {(s.target, s.shape) for s in steps}
    assert {sh for t, sh in shapes if t == "one"} == {"isolate", "one-way-in", "one-way-out"}
    assert {sh for t, sh in shapes if t == "minority"} == {"majority-minority"}
    assert {sh for t, sh in shapes if t == "all"} == {"halves", "bridge", "ring"}
    assert {sh for t, sh in shapes if t == "client"} == {"client", "client-one-way"}


def test_none_means_no_faults_and_unknown_names_are_rejected():
    assert parse_faults("none") == []
    assert parse_faults("kill, partition,kill") == ["kill", "partition"]
    with pytest.raises(GregorError, match="unknown nemesis fault 'crash'"):
        parse_faults("kill,crash")
    with pytest.raises(GregorError, match="unknown nemesis target 'leaderr'"):
        parse_targets("leaderr")
    with pytest.raises(GregorError, match="leader:3"):
        parse_targets("leader:x")
    assert parse_targets("leader:3,txn:t-1,group:g,node:n2,client:zombie") == [
        "leader:3",
        "txn:t-1",
        "group:g",
        "node:n2",
        "client:zombie",
    ]


def test_kill_with_only_client_targets_is_refused():
    with pytest.raises(GregorError, match="client targets need partition or pause"):
        take(1, faults=["kill"], targets=["client"], seed=0, interval_s=1)


def parser():
    p = argparse.ArgumentParser()
    add_nemesis_arguments(p)
    return p


def test_options_parse_into_runner_arguments():
    args = parser().parse_args(
        ["--nemesis", "partition,pause,kill", "--nemesis-interval", "2.5", "--nemesis-targets", "leader,controller"]
    )
    assert (args.nemesis, args.nemesis_interval, args.nemesis_targets) == (
        ["partition", "pause", "kill"],
        2.5,
        ["leader", "controller"],
    )
    defaults = parser().parse_args([])
    assert defaults.nemesis == [] and defaults.nemesis_interval == 10.0 and "leader" in defaults.nemesis_targets


@pytest.mark.parametrize(
    "argv", [["--nemesis", "explode"], ["--nemesis-interval", "0"], ["--nemesis-targets", "leader:k"]]
)
def test_bad_options_exit_with_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(argv)
    assert exit_.value.code == 2
    assert "nemesis" in capsys.readouterr().err


def test_netem_steps_keep_to_the_profiles_the_kernel_can_apply():
    steps = take(100, faults=["netem"], targets=["one"], seed=2, interval_s=1, profiles=["loss", "rate"])
    assert {s.profile for s in steps} == {"loss", "rate"}


def test_a_fixed_shape_and_hold_apply_to_every_step():
    steps = take(
        50, faults=["partition", "kill"], targets=["one", "leader"], seed=4, interval_s=3, shape="one-way-in", hold_s=7
    )
    assert all(s.hold_s == 7 for s in steps)
    assert {s.shape for s in steps if s.fault == "partition"} == {"one-way-in"}
    assert all(s.shape is None for s in steps if s.fault == "kill")


def test_kill_client_takes_client_targets_and_lone_leader_leader_targets():
    steps = take(
        200,
        faults=["kill-client", "lone-leader", "kill"],
        targets=["client:producer", "leader:0", "one"],
        seed=5,
        interval_s=1,
    )
    assert {s.target for s in steps if s.fault == "kill-client"} == {"client:producer"}
    assert {s.target for s in steps if s.fault == "lone-leader"} == {"leader:0"}
    assert {s.target for s in steps if s.fault == "kill"} == {"leader:0", "one"}
    with pytest.raises(GregorError, match="fits faults"):
        take(1, faults=["lone-leader"], targets=["one"], seed=0, interval_s=1)


def test_a_fixed_shape_must_fit_the_targets():
    from nemesis.schedule import check_shape

    check_shape("client-deaf", ["client:producer"])
    check_shape(None, ["one", "client"])
    with pytest.raises(GregorError, match="does not fit target 'one'"):
        check_shape("client-deaf", ["client", "one"])
    with pytest.raises(GregorError, match="unknown partition shape"):
        check_shape("triangle", ["one"])
