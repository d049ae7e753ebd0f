"""Where each system's versions come from: Maven Central's metadata for Kafka,
the Go module proxy for kfake, crates.io for Tansu; never a table of ours."""

from __future__ import annotations

import os

import pytest

from ground.errors import GregorError
from harness.systems.kafka import install as kafka_install
from harness.systems.kfake import build as kfake_build

METADATA = """<metadata><versioning><latest>4.4.0</latest><versions>
<version>3.7.2</version><version>3.8.0</version><version>3.9.1</version><version>4.0.0-rc1</version>
<version>4.0.0</version><version>4.4.0</version></versions></versioning></metadata>"""


def test_maven_metadata_gives_the_releases_gregor_runs():
    assert kafka_install.parse_metadata(METADATA) == ["3.8.0", "3.9.1", "4.0.0", "4.4.0"]


def test_the_cached_version_list_serves_when_maven_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = tmp_path / "gregor" / "kafka" / "maven-metadata.xml"
    cached.parent.mkdir(parents=True)
    cached.write_text(METADATA)
    os.utime(cached, (0, 0))  # older than a day: Maven is asked first
    monkeypatch.setattr(kafka_install, "repository", lambda: "http://127.0.0.1:9/maven2")
    assert kafka_install.maven_versions()[-1] == "4.4.0"
    with pytest.raises(GregorError, match=r"newest: 4.4.0, 4.0.0, 3.9.1, 3.8.0$"):
        kafka_install.check_version("4.5.0")


def test_no_list_and_no_network_says_maven_is_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kafka_install, "repository", lambda: "http://127.0.0.1:9/maven2")
    with pytest.raises(GregorError, match="Maven Central is unreachable"):
        kafka_install.check_version("4.4.0")


def test_the_real_maven_central_lists_the_versions_the_issue_names():
    versions = kafka_install.maven_versions()
    for version in ("3.8.1", "3.9.1", "4.0.0", "4.4.0"):
        assert version in versions


def test_kfake_pseudo_versions_sort_by_their_commit_time():
    assert kfake_build.pseudo_time("v0.0.0-20260918054303-01f206a7e32c") == "20260918054303"
    assert kfake_build.pseudo_time("v1.22.0") == ""


def test_kfake_options_found_in_its_source(tmp_path):
    (tmp_path / "config.go").write_text(
        "package kfake\n\nfunc NumBrokers(n int) Opt {}\nfunc Ports(p ...int) Opt {}\n"
        "func ListenFn(f X) Opt {}\nfunc DataDir(d string) Opt {}\n"
    )
    (tmp_path / "x_test.go").write_text("func EnableSASL() Opt {}\n")  # tests do not count
    assert kfake_build.features(str(tmp_path)) == ("NumBrokers", "Ports", "ListenFn", "DataDir")


def test_generated_options_use_what_kfake_has_and_refuse_what_it_lacks():
    full = kfake_build.options_go(kfake_build.REQUIRED + kfake_build.OPTIONAL)
    assert "kfake.DataDir(dataDir)" in full and "kfake.Superuser(" in full and '"fmt"' not in full
    bare = kfake_build.options_go(kfake_build.REQUIRED)
    assert "kfake.DataDir" not in bare and "cannot keep data (no DataDir)" in bare and '"fmt"' in bare
