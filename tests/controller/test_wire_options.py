"""`gregor run --nemesis wire`: what it takes and what it refuses, in one line, before anything starts."""

from __future__ import annotations

import pytest
from test_run_config import config

from ground.errors import GregorError

WIRE_RUN = ("--workload", "txn", "--nemesis", "wire")


def test_a_wire_run_puts_clients_in_namespaces_and_keeps_its_rules():
    cfg = config(*WIRE_RUN, "--wire-rule", "delay:api=EndTxn:ms=3000:count=1", "--wire-rule", "duplicate:api=Produce")
    assert cfg.client_netns is True
    assert cfg.wire_rule == ["delay:api=EndTxn:ms=3000:count=1", "duplicate:api=Produce"]
    assert cfg.as_options()["wire-rule"] == cfg.wire_rule


@pytest.mark.parametrize(
    "argv, says",
    [
        (WIRE_RUN, "--nemesis wire needs a rule to switch on"),
        (("--workload", "txn", "--wire-rule", "delay:ms=5"), "--wire-rule is for --nemesis wire"),
        ((*WIRE_RUN, "--wire-rule", "delay:api=Nope:ms=5"), "unknown Kafka API 'Nope'"),
        ((*WIRE_RUN, "--wire-rule", "delay:ms=5:on=later"), "on is request or response, not 'later'"),
        ((*WIRE_RUN, "--wire-rule", "hold:ms=5:on=response"), '"on": "response" is for delay only'),
        ((*WIRE_RUN, "--wire-rule", "slow:ms=5"), "begins with one of delay"),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--client-config", "security.protocol=SSL"),
            "security.protocol=ssl hides",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--client-config", "security.protocol=SASL_PLAINTEXT"),
            "wire faults need PLAINTEXT clients",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "leader", "--system", "kfake"),
            "are for Apache Kafka labs only, not kfake",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "coordinator", "--system", "tansu"),
            "are for Apache Kafka labs only, not tansu",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "all", "--system", "external")
            + ("--bootstrap", "h:1"),
            "are for Apache Kafka labs only, not external",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "leader", "--system", "kfake")
            + ("--backend", "docker"),
            "are for Apache Kafka labs only, not kfake",
        ),
        (
            (*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "node:n1", "--system", "external")
            + ("--backend", "ssh", "--hosts", "a,b,c", "--insecure-host-keys"),
            "are for Apache Kafka labs only, not external",
        ),
    ],
)
def test_what_a_wire_run_refuses(argv, says):
    with pytest.raises(GregorError) as error:
        config(*argv)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_node_target_makes_broker_sources_and_needs_no_client_namespace():
    cfg = config(*WIRE_RUN, "--wire-rule", "delay:api=WriteTxnMarkers:ms=300", "--nemesis-targets", "coordinator")
    assert cfg.nemesis_targets == ["coordinator"] and cfg.client_netns is False
    both = config(*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "leader,client:txn")
    assert both.client_netns is True


@pytest.mark.parametrize(
    "backend", [("--backend", "docker"), ("--backend", "ssh", "--hosts", "a,b,c", "--insecure-host-keys")]
)
def test_broker_sources_of_apache_kafka_run_on_docker_and_ssh(backend):
    """The relay runs on each node there (harness/wire_nodes.py)."""
    cfg = config(*WIRE_RUN, "--wire-rule", "delay:api=WriteTxnMarkers:ms=5", "--nemesis-targets", "node:n1", *backend)
    assert cfg.nemesis_targets == ["node:n1"] and cfg.client_netns is False


def test_client_sources_stay_on_every_backend_and_system():
    for extra in (("--backend", "docker"), ("--system", "kfake")):
        cfg = config(*WIRE_RUN, "--wire-rule", "delay:api=EndTxn:ms=5", "--nemesis-targets", "client", *extra)
        assert cfg.client_netns is True


def test_a_scripted_run_puts_its_client_where_the_relay_serves_it():
    cfg = config("--workload", "script", "--script", "delayed-endtxn")
    assert cfg.client_netns is True and cfg.script == "delayed-endtxn"
    assert cfg.client_options()["script"] == "delayed-endtxn"
    assert cfg.client_record()["script"] == "delayed-endtxn"


@pytest.mark.parametrize(
    "argv, says",
    [
        (("--workload", "script"), "--workload script needs --script NAME; the scripts are abort-sequence-reuse"),
        (("--workload", "script", "--script", "nope"), "invalid choice"),
        (("--workload", "txn", "--script", "delayed-endtxn"), "--script is for the script workload, not txn"),
        (
            ("--workload", "script", "--script", "delayed-endtxn", "--client-config", "security.protocol=SSL"),
            "need PLAINTEXT clients",
        ),
    ],
)
def test_what_a_scripted_run_refuses(argv, says):
    with pytest.raises(GregorError) as error:
        config(*argv)
    assert says in str(error.value) and "\n" not in str(error.value)
