"""Bad input about systems gets one line that says what to fix (exit 2), and
a fault a system or backend cannot take is refused before anything starts."""

from __future__ import annotations

import argparse
import os

import pytest
from lab.test_errors import one_line_error

from ground.errors import GregorError
from harness.cli import main
from harness.controller import run_cli

LAB = os.environ.get("GREGOR_TEST_LAB_PREFIX", "") + "sysin"


def test_unknown_system(capsys):
    with pytest.raises(SystemExit) as exited:  # argparse's own exit, through our one-line parser
        main(["lab", "up", "--lab", LAB, "--system", "redpandas"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gregor: error: ") and "\n" not in err
    assert "unknown system 'redpandas'" in err and "kafka, kfake, tansu, external" in err


def test_external_needs_bootstrap_and_takes_no_containers(capsys):
    assert "needs --bootstrap host:port" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--system", "external"])
    assert "give host:port" in one_line_error(
        capsys, ["lab", "up", "--lab", LAB, "--system", "external", "--bootstrap", "broker-without-port"]
    )
    assert "needs no containers" in one_line_error(
        capsys, ["lab", "up", "--lab", LAB, "--system", "external", "--backend", "docker", "--bootstrap", "h:1"]
    )


def test_an_unreachable_bootstrap_server_fails_at_once(capsys):
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--system", "external", "--bootstrap", "127.0.0.1:9"])
    assert "does not answer at 127.0.0.1:9" in err and "refused" in err


def test_an_option_of_another_system(capsys):
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--bootstrap", "h:9092"])
    assert "--bootstrap is an option of the external system, not of kafka" in err
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--system", "tansu", "--controllers", "3"])
    assert "--controllers is an option of the kafka system, not of tansu" in err


def test_bad_kafka_options(capsys):
    assert "0 (combined nodes) to 5" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--controllers", "9"])
    assert "whole number" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--controllers", "x"])
    assert "0, 1 or 2" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--transaction-version", "3"])


def test_versions_no_registry_has_name_the_newest(capsys):
    err = one_line_error(
        capsys, ["lab", "up", "--lab", LAB, "--system", "kfake", "--version", "v0.0.0-20990101000000-000000000000"]
    )
    assert "the Go module proxy does not have it" in err and "newest: v0.0.0-2026" in err
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--system", "tansu", "--version", "9.9.9"])
    assert "crates.io does not have it" in err and "newest: 0.6.0" in err


def test_client_config_may_not_change_what_test_json_records(capsys):
    err = one_line_error(capsys, ["run", "--lab", LAB, "--workload", "queue", "--client-config", "acks=1"])
    assert "--client-config acks would change a setting Gregor records" in err
    assert "key=value" in one_line_error(
        capsys, ["run", "--lab", LAB, "--workload", "queue", "--client-config", "security.protocol"]
    )


def test_memory_tansu_is_one_broker():
    from harness.systems.tansu.system import TansuSystem

    system = TansuSystem.__new__(TansuSystem)
    system.storage = "memory"
    with pytest.raises(GregorError, match="use --nodes 1"):
        system.node_names(3)


# --- faults a system cannot take ---------------------------------------------------------------


def run_args(*argv: str):
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    return parser.parse_args(["--lab", LAB, *argv])


def test_external_refuses_node_faults_and_narrows_to_clients():
    with pytest.raises(GregorError, match="the external system cannot take kill faults"):
        run_cli.validate(
            run_args("--workload", "queue", "--system", "external", "--bootstrap", "h:1", "--nemesis", "kill")
        )
    cfg = run_cli.validate(
        run_args("--workload", "queue", "--system", "external", "--bootstrap", "h:1", "--nemesis", "partition,pause")
    )
    assert cfg.nemesis_targets == ["client"] and cfg.client_netns
    with pytest.raises(GregorError, match="target 'leader' needs node access"):
        run_cli.validate(
            run_args(
                "--workload",
                "queue",
                "--system",
                "external",
                "--bootstrap",
                "h:1",
                "--nemesis",
                "pause",
                "--nemesis-targets",
                "leader",
            )
        )


def test_kfake_partitions_only_clients_but_pauses_and_kills_its_node():
    cfg = run_cli.validate(run_args("--workload", "txn", "--system", "kfake", "--nemesis", "partition,pause,kill"))
    assert "leader" in cfg.nemesis_targets and cfg.client_netns
    cfg = run_cli.validate(run_args("--workload", "txn", "--system", "kfake", "--nemesis", "partition"))
    assert cfg.nemesis_targets == ["client"]


def test_the_plan_gives_client_only_faults_client_targets():
    import itertools

    from nemesis.schedule import plan

    steps = list(
        itertools.islice(
            plan(["partition", "kill"], ["leader", "one", "client"], 3, 1.0, node_faults=frozenset({"kill"})), 200
        )
    )
    assert {s.target for s in steps if s.fault == "partition"} == {"client"}
    assert {s.target for s in steps if s.fault == "kill"} == {"leader", "one"}
    unrestricted = list(itertools.islice(plan(["partition", "kill"], ["leader", "one", "client"], 3, 1.0), 200))
    assert unrestricted == list(
        itertools.islice(
            plan(
                ["partition", "kill"], ["leader", "one", "client"], 3, 1.0, node_faults=frozenset({"partition", "kill"})
            ),
            200,
        )
    )
