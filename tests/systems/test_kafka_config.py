"""Broker settings: safe defaults, overrides from files and the command line."""

from __future__ import annotations

import pytest

from ground.errors import GregorError
from harness.systems.kafka.config import default_settings, node_properties, parse_overrides


def test_defaults_are_the_safe_ones_for_three_nodes():
    settings = default_settings(3)
    assert settings["default.replication.factor"] == "3"
    assert settings["min.insync.replicas"] == "2"
    assert settings["transaction.state.log.min.isr"] == "2"
    assert settings["unclean.leader.election.enable"] == "false"


def test_a_single_node_cannot_ask_for_more_replicas_than_it_has():
    settings = default_settings(1)
    assert settings["offsets.topic.replication.factor"] == "1"
    assert settings["min.insync.replicas"] == "1"


def test_command_line_wins_over_file_and_both_over_defaults(tmp_path):
    config = tmp_path / "broker.properties"
    config.write_text("# comment\nmin.insync.replicas=1\nlog.retention.ms = 1000\n")
    overrides = parse_overrides(["log.retention.ms=-1"], [str(config)])
    assert overrides == {"min.insync.replicas": "1", "log.retention.ms": "-1"}
    props = node_properties(2, "10.0.0.12", "1@x:9093", tmp_path, 3, overrides)
    assert props["min.insync.replicas"] == "1" and props["node.id"] == "2"
    assert props["advertised.listeners"] == "PLAINTEXT://10.0.0.12:9092"


def test_bad_overrides_say_what_to_fix(tmp_path):
    with pytest.raises(GregorError, match="key=value"):
        parse_overrides(["no-equals-sign"], None)
    with pytest.raises(GregorError, match="not found"):
        parse_overrides(None, [str(tmp_path / "missing.properties")])
    bad = tmp_path / "bad.properties"
    bad.write_text("lonely\n")
    with pytest.raises(GregorError, match="bad.properties: 'lonely' has no value"):
        parse_overrides(None, [str(bad)])


def test_a_properties_file_is_read_in_the_whole_format(tmp_path):
    config = tmp_path / "broker.properties"
    config.write_text(
        "! a comment too\n"
        "log.retention.ms : 1000\n"  # ':' separates as well as '='
        "num.io.threads 4\n"  # and so does white space
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,\\\n"  # a line continued
        "    CONTROLLER:PLAINTEXT\n"
        "ssl.keystore.location=/etc/k\\u00e9ys/a\\=b\n"  # escapes
    )
    assert parse_overrides(None, [str(config)]) == {
        "log.retention.ms": "1000",
        "num.io.threads": "4",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "ssl.keystore.location": "/etc/k\u00e9ys/a=b",
    }
