"""Bad input gets one line that says what to fix (exit 2), checked through the CLI."""

from __future__ import annotations

import os

from backend_params import lab_name

from harness.cli import main
from harness.systems.kafka import install as kafka_install
from lab.helpers import needs_root

LAB = lab_name("labe")


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gregor: error: ") and "\n" not in err, err
    return err


def test_unknown_version_lists_the_newest_on_maven_central(capsys):
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--version", "9.9.9"])
    assert "unknown Kafka version '9.9.9'" in err and "Maven Central does not have it" in err
    newest = kafka_install.maven_versions()[-1]
    assert f"newest: {newest}" in err
    assert "9.9.9" in one_line_error(capsys, ["kafka", "install", "--version", "9.9.9"])
    assert "older than the 3.8.0" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--version", "3.7.2"])


def test_node_count_below_one(capsys):
    assert "at least 1" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--nodes", "0"])


def test_not_root(capsys, monkeypatch):
    monkeypatch.setattr("harness.backends.local.os.geteuid", lambda: 1000)
    assert "needs root" in one_line_error(capsys, ["lab", "up", "--lab", LAB])
    assert "needs root" in one_line_error(capsys, ["lab", "down", "--lab", LAB])


@needs_root
def test_java_missing(capsys, monkeypatch, tmp_path):
    # every tool of this machine but java
    for folder in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for tool in os.listdir(folder) if os.path.isdir(folder) else ():
            if tool != "java" and not (tmp_path / tool).exists():
                (tmp_path / tool).symlink_to(os.path.join(folder, tool))
    monkeypatch.setenv("PATH", str(tmp_path))
    err = one_line_error(capsys, ["lab", "up", "--lab", LAB, "--nodes", "1"])
    assert "java not found" in err and "n1" in err


def test_bad_lab_name_and_bad_broker_setting(capsys):
    assert "bad lab name" in one_line_error(capsys, ["lab", "up", "--lab", "Has_Caps"])
    assert "key=value" in one_line_error(capsys, ["lab", "up", "--lab", LAB, "--broker-config", "oops"])


def test_no_lab_up(capsys):
    assert "no lab named 'labnone'" in one_line_error(capsys, ["lab", "status", "--lab", "labnone"])


def test_maven_central_unreachable(capsys, monkeypatch, tmp_path):
    # A real Maven run against a mirror on a closed local port and an empty local repository.
    settings = tmp_path / "settings.xml"
    settings.write_text(
        f"<settings><localRepository>{tmp_path / 'm2'}</localRepository><mirrors><mirror>"
        "<id>closed</id><mirrorOf>*</mirrorOf><url>http://127.0.0.1:9/maven2</url>"
        "</mirror></mirrors></settings>"
    )
    monkeypatch.setenv("GREGOR_MAVEN_SETTINGS", str(settings))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    err = one_line_error(capsys, ["kafka", "install", "--version", "3.8.1"])
    assert "Maven Central is unreachable" in err
    assert not (tmp_path / "cache" / "gregor" / "kafka" / "3.8.1").exists()


def test_second_install_is_cached_and_never_runs_maven(tmp_path):
    first = kafka_install.install(kafka_install.DEFAULT_VERSION, progress=lambda _m: None)
    assert any(first.libs.glob("kafka_2.13-*.jar")) and (first.home / "log4j.properties").is_file()
    messages: list[str] = []
    second = kafka_install.install(
        kafka_install.DEFAULT_VERSION, progress=messages.append, mvn=str(tmp_path / "no-such-maven")
    )
    assert second == first
    assert messages == [f"Kafka {first.version} already installed in {first.home}"]
