"""The run configuration's declarations: each field of RunConfig declares its option
once, and the parser, the clients' options, test.json and the catalogue's
argument lists all follow from it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from ground.errors import GregorError
from ground.options import REPEAT, SWITCH, Option, to_argv
from harness.controller import run_cli
from harness.controller.run_config import OPTIONS, SETTINGS, RunConfig, options_to_argv
from workloads.kafka_client import librdkafka_version

# Options whose text validate turns into a number, with the error "x" gets.
WHOLE = (
    "--concurrency",
    "--seed",
    "--keys",
    "--partitions-per-topic",
    "--topics",
    "--nodes",
    "--max-in-flight",
    "--retries",
    "--batch",
    "--transaction-timeout-ms",
    "--process-ms",
    "--txn-hold-ms",
    "--min-insync-replicas",
    "--replication-factor",
)
NUMBER = ("--time-limit", "--rate", "--drain-time-limit", "--hang-s")
# Options argparse checks itself (a bad value is a usage error), and a good value of each.
CHECKED_BY_ARGPARSE = {
    "--backend": "docker",
    "--system": "kfake",
    "--nemesis": "kill",
    "--nemesis-interval": "3",
    "--nemesis-targets": "leader",
    "--nemesis-hold": "2",
    "--wire-rule": "delay:api=EndTxn:ms=100",
}


class Refusing(argparse.ArgumentParser):
    def error(self, message):
        raise GregorError(message)


def parse(*argv: str):
    parser = Refusing(prog="gregor run")
    run_cli.add_arguments(parser)
    return parser.parse_args(["--lab", "rcfgt", *argv])


def config(*argv: str) -> RunConfig:
    return run_cli.validate(parse(*argv))


def test_every_field_declares_its_options_once_each_with_help_and_a_default():
    names = [field.name for field in dataclasses.fields(RunConfig)]
    assert list(SETTINGS) == names
    derived = [name for name, setting in SETTINGS.items() if not setting.options]
    assert derived == ["transactional"]
    flags = [option.flag for option in OPTIONS]
    assert len(flags) == len(set(flags)), "an option is declared twice"
    for option in OPTIONS:
        assert option.flag.startswith("--") and option.help.strip(), option.flag
        assert option.required or option.kind != SWITCH or option.default in (False, None), option.flag
        assert option.kind != REPEAT or option.default == (), option.flag
    assert [o.flag for o in OPTIONS if o.required] == ["--workload"]


def test_the_parser_takes_every_declared_option():
    defaults = vars(parse("--workload", "queue"))
    for option in OPTIONS:
        if option.flag in ("--workload", "--lab"):
            continue
        if option.kind == SWITCH:
            value = True
        elif option.kind == REPEAT:
            value = [CHECKED_BY_ARGPARSE.get(option.flag, "a=b")]
        elif option.choices:
            value = next(choice for choice in option.choices if choice != option.default)
        else:
            value = CHECKED_BY_ARGPARSE.get(option.flag, "7")
        args = vars(parse("--workload", "queue", *option.words(value)))
        assert args[option.dest] != defaults[option.dest], option.flag


@pytest.mark.parametrize("flag", WHOLE + NUMBER)
def test_a_bad_number_gets_its_one_line_error(flag):
    kind = "a whole number" if flag in WHOLE else "a number"
    with pytest.raises(GregorError) as error:
        config("--workload", "txn", flag, "x")
    assert str(error.value) == f"{flag} must be {kind}, got 'x'"


def test_no_other_option_is_a_number_validate_parses():
    refusing = set()
    for option in OPTIONS:
        if option.kind != "value" or option.choices or option.type or option.flag in ("--workload", "--lab"):
            continue
        try:
            config("--workload", "txn", option.flag, "x")
        except GregorError as error:
            if "must be" in str(error):
                refusing.add(option.flag)
    assert refusing == set(WHOLE + NUMBER)


def test_a_bad_workload_option_is_refused_by_its_declared_workload():
    with pytest.raises(GregorError, match="--copier-offsets is for the eos workload, not queue"):
        config("--workload", "queue", "--copier-offsets", "after")
    assert config("--workload", "eos", "--copier-offsets", "after").copier_offsets == "after"


def test_the_configuration_is_frozen_with_what_validate_settled():
    cfg = config("--workload", "txn", "--nodes", "2", "--nemesis", "power-loss")
    assert (cfg.replication_factor, cfg.min_insync, cfg.hang_s, cfg.storage) == (2, 2, 15.0, "powerfs")
    assert cfg.transactional and cfg.name == "kafka-txn" and cfg.check
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3


def test_the_clients_options_and_test_json_sections_follow_the_declarations():
    cfg = config(
        "--workload", "txn", "--acks", "1", "--hang", "between", "--producer-config", "linger.ms=5", "--retries", "2"
    )
    assert cfg.client_options() == {
        "library": "librdkafka",
        "library.version": librdkafka_version(),
        "acks": "1",
        "enable.idempotence": True,
        "isolation.level": "read_committed",
        "auto.commit": False,
        "subscribe": False,
        "max.in.flight": 5,
        "retries": 2,
        "batch": 1,
        "transaction.timeout.ms": 10000,
        "producer_config": {"linger.ms": "5"},
        "consumer_config": {},
        "process.ms": 0,
        "zombie.kind": "transactional",
        "copier.offsets": "txn",
        "script": None,
        "txn.hold.ms": 0,
    }
    # a transactional producer acks all whatever --acks says; only settings away from
    # their default are recorded after transaction.timeout.ms, and hang.s with a hang
    assert list(cfg.client_record().items()) == [
        ("library", "librdkafka"),
        ("library.version", librdkafka_version()),
        ("acks", "all"),
        ("enable.idempotence", True),
        ("isolation.level", "read_committed"),
        ("transactional", True),
        ("auto.commit", False),
        ("subscribe", False),
        ("max.in.flight.requests.per.connection", 5),
        ("retries", 2),
        ("batch", 1),
        ("transaction.timeout.ms", 10000),
        ("producer_config", {"linger.ms": "5"}),
        ("hang", "between"),
        ("hang.s", 15.0),
    ]
    cfg = config("--workload", "queue", "--unclean-leader-election", "true", "--topic-config", "flush.messages=1")
    assert cfg.topic_settings() == {
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": True,
        "replication.factor": 3,
        "flush.messages": "1",
    }
    assert cfg.topic_configs() == {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "flush.messages": "1",
    }


@pytest.mark.parametrize(
    "argv",
    [
        ("--workload", "queue"),
        ("--workload", "txn", "--hang", "inside", "--txn-hold-ms", "200", "--no-check", "--seed", "4"),
        ("--workload", "queue", "--acks", "0", "--idempotence", "false", "--topic-config", "a=b", "--client-netns"),
        ("--workload", "zombie", "--zombie-kind", "idempotent", "--resend", "--nemesis", "kill-client"),
        ("--workload", "queue", "--system", "external", "--bootstrap", "h:1", "--nemesis", "partition"),
        ("--workload", "queue", "--backend", "ssh", "--hosts", "a,b,c", "--insecure-host-keys"),
    ],
)
def test_test_json_run_gives_the_same_configuration_again(argv):
    cfg = config(*argv)
    again = run_cli.validate(parse(*options_to_argv(cfg.as_options())))
    assert again == cfg


def test_client_config_values_are_never_recorded():
    cfg = config("--workload", "queue", "--client-config", "sasl.password=secret")
    assert cfg.client_config == {"sasl.password": "secret"}
    assert "secret" not in str(cfg.as_options()) and "client-config" not in cfg.as_options()


def test_the_ssh_key_file_is_never_recorded():
    cfg = config("--workload", "queue", "--backend", "ssh", "--hosts", "a,b,c", "--ssh-key", "/keys/id_secret")
    assert "/keys/id_secret" not in str(cfg.as_options()) and "ssh-key" not in cfg.as_options()
    assert cfg.as_options()["hosts"] == "a,b,c"


def test_settings_become_arguments_by_their_declared_shape():
    assert options_to_argv({"acks": "1", "client-netns": True, "resend": False, "topic-config": ["a=b", "c=d"]}) == [
        "--acks",
        "1",
        "--client-netns",
        "--topic-config",
        "a=b",
        "--topic-config",
        "c=d",
    ]
    assert options_to_argv({"producer-config": "linger.ms=0", "retries": None}) == ["--producer-config", "linger.ms=0"]
    for settings, message in (
        ({"acks-mode": "1"}, "unknown option --acks-mode"),
        ({"client-netns": "yes"}, "client-netns is a switch"),
        ({"nemesis": ["kill", "pause"]}, "nemesis takes one value"),
        ({"hang": True}, "hang takes one value"),
    ):
        with pytest.raises(GregorError, match=message):
            options_to_argv(settings)
    assert to_argv([Option("--x", "x")], {"x": 3}) == ["--x", "3"]


def test_the_client_is_librdkafka_or_java_and_bad_ones_get_one_line(tmp_path, monkeypatch):
    with pytest.raises(GregorError, match=r"^unknown client 'rust'; the clients are librdkafka, java$"):
        config("--workload", "txn", "--client", "rust")
    with pytest.raises(GregorError, match=r"^--client-version 9\.9: librdkafka's version is the installed"):
        config("--workload", "txn", "--client-version", "9.9")
    monkeypatch.setenv("PATH", str(tmp_path))  # no java, javac nor mvn
    with pytest.raises(GregorError) as no_jdk:
        config("--workload", "txn", "--client", "java", "--client-version", "4.4.0-not-built")
    assert str(no_jdk.value) == (
        "--client java needs a JDK 17+ (java, javac) and Maven, and java, javac, mvn are not found; "
        "install them: apt-get install openjdk-17-jdk-headless maven"
    )
