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
        ((*WIRE_RUN, "--wire-rule", "delay:ms=5", "--nemesis-targets", "leader"), "broker sources) are not yet"),
    ],
)
def test_what_a_wire_run_refuses(argv, says):
    with pytest.raises(GregorError) as error:
        config(*argv)
    assert says in str(error.value) and "\n" not in str(error.value)


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
