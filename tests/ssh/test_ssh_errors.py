"""What goes wrong with a host gets one line naming the node and the host, and
saying what to do: a changed or unknown host key, a key the host refuses or a
file that is no key, a refused connection, a host that does not answer, a host
without Java or without iptables. Real sshd, real failures (tests/ssh_hosts.py)."""

from __future__ import annotations

import contextlib
import ipaddress

import pytest
from backend_params import lab_name

from harness import registry
from harness.backends.ssh_sandbox import keygen
from harness.cli import main
from harness.lab import state_path

pytestmark = pytest.mark.lab

LAB = lab_name("sse")


def lab_up(capsys, sandbox, host, *extra: str, key=None, known=None) -> str:
    """`gregor lab up` of one node on `host`; its one-line error."""
    argv = [
        "lab",
        "up",
        "--lab",
        LAB,
        "--nodes",
        "1",
        "--backend",
        "ssh",
        "--hosts",
        host,
        "--ssh-key",
        key or sandbox.key_file,
        "--known-hosts",
        known or sandbox.known_hosts,
        *extra,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gregor: error: ") and "\n" not in err, err
    assert not state_path(LAB).exists()
    return err


@contextlib.contextmanager
def without(sandbox, index: int, path: str):
    """The host lacks `path` for a while (moved aside inside its container)."""
    sandbox.exec(index, ["mv", path, f"{path}.gone"])
    try:
        yield
    finally:
        sandbox.exec(index, ["mv", f"{path}.gone", path])


def test_a_changed_host_key_is_refused_with_how_to_accept_it(capsys, sandbox, tmp_path):
    host = sandbox.hosts[0]
    other = keygen(str(tmp_path / "other"), "someone else").split()
    known = tmp_path / "known_hosts"
    known.write_text(f"{host.host} {other[0]} {other[1]}\n")
    err = lab_up(capsys, sandbox, host.where(), known=str(known))
    assert f"n1 ({host.where()}): the host key has CHANGED" in err
    assert f"ssh-keygen -f {known} -R '{host.host}'" in err and "--insecure-host-keys" in err


def test_an_unknown_host_key_is_refused_with_how_to_add_it(capsys, sandbox, tmp_path):
    host = sandbox.hosts[0]
    (tmp_path / "empty").write_text("")
    err = lab_up(capsys, sandbox, host.where(), known=str(tmp_path / "empty"))
    assert f"n1 ({host.where()}): unknown host key (ssh-ed25519 SHA256:" in err and "ssh-keyscan" in err


def test_a_key_the_host_does_not_accept(capsys, sandbox, tmp_path):
    host = sandbox.hosts[0]
    keygen(str(tmp_path / "stranger"), "not authorized")
    err = lab_up(capsys, sandbox, host.where(), key=str(tmp_path / "stranger"))
    assert f"n1 ({host.where()}): the host refused the key {tmp_path / 'stranger'} for user root" in err


def test_a_key_file_that_is_no_key(capsys, sandbox, tmp_path):
    (tmp_path / "notakey").write_text("hello\n")
    err = lab_up(capsys, sandbox, sandbox.hosts[0].where(), key=str(tmp_path / "notakey"))
    assert f"--ssh-key {tmp_path / 'notakey'}: not a private key" in err


def test_a_refused_connection(capsys, sandbox):
    host = sandbox.hosts[0]
    err = lab_up(capsys, sandbox, f"root@{host.host}:2")
    assert f"n1 (root@{host.host}:2): connection refused on port 2" in err


def test_a_host_that_does_not_answer(capsys, sandbox):
    """An address of the hosts' network that no host has."""
    nobody = str(ipaddress.ip_address(sandbox.hosts[-1].host) + 100)
    err = lab_up(capsys, sandbox, f"root@{nobody}")
    assert err.startswith(f"gregor: error: n1 (root@{nobody}:22): ")
    assert "unreachable" in err or "no answer" in err


def test_a_host_without_java(capsys, sandbox):
    host = sandbox.hosts[1]
    with without(sandbox, 1, "/usr/bin/java"):
        err = lab_up(capsys, sandbox, host.where())
    assert f"n1 ({host.where()}): java not found" in err and "openjdk-17-jre-headless" in err
    assert registry.backend("ssh", **sandbox.options()).leftovers(LAB) == []  # the failed up cleaned up


def test_a_host_without_iptables(capsys, sandbox):
    host = sandbox.hosts[1]
    with without(sandbox, 1, "/usr/sbin/iptables"):
        err = lab_up(capsys, sandbox, host.where())
    assert f"n1 ({host.where()}): iptables not found" in err and "apt-get install iptables" in err


def test_more_nodes_than_hosts(capsys, sandbox):
    err = lab_up(capsys, sandbox, sandbox.hosts[0].where(), "--nodes", "3")
    assert "the lab has 3 nodes but 1 hosts were given" in err
