"""An SSH node's primitives against real sshd: argument lists arrive intact,
a lost connection is opened again, an unreachable host is named, files are
uploaded once into a checksummed cache, and a spawned process outlives the
command that started it."""

from __future__ import annotations

import hashlib

import pytest
from backend_params import lab_name
from polling import wait_until

from ground.errors import GregorError
from harness.backends import ssh_files
from harness.backends.ssh import SshBackend

pytestmark = pytest.mark.lab

LAB = lab_name("ssn")


@pytest.fixture(scope="module")
def node(sandbox):
    backend = SshBackend(**{**sandbox.options(), "hosts": sandbox.hosts[2].where()})
    backend.teardown(LAB, None, print)
    state = backend.provision(LAB, ["n1"], print)
    yield backend.nodes(LAB, state)[0]
    backend.teardown(LAB, state, print)
    assert backend.leftovers(LAB) == []


def sshd_sessions(sandbox) -> list[str]:
    """The pids of sshd's per-connection processes on host 3 (seen beside SSH, through Docker)."""
    out = sandbox.exec(2, ["ps", "-eo", "pid=,args="])
    return [line.split()[0] for line in out.splitlines() if "sshd: root@notty" in line]


def test_argument_lists_reach_the_host_unchanged(node):
    values = ["a b", "$(id)", "'; touch /tmp/pwned; '", "`id`", "*", "\\", '"', "ü", "-n", ""]
    assert node.exec(["printf", "%s\\n", *values]).stdout.split("\n")[:-1] == values
    assert node.exec(["test", "-e", "/tmp/pwned"], check=False).returncode == 1


def test_stdin_exit_status_and_a_failure_naming_the_host(node):
    result = node.exec(["sh", "-c", "cat; echo oops >&2; exit 3"], stdin="hello", check=False)
    assert (result.returncode, result.stdout, result.stderr) == (3, "hello", "oops\n")
    with pytest.raises(GregorError, match=rf"^n1 \({node.host.where()}\): false exited 1"):
        node.exec(["false"])


def test_a_lost_connection_is_opened_again(node, sandbox):
    node.exec(["true"])
    before = node.connection.transport()
    sessions = sshd_sessions(sandbox)
    assert sessions
    sandbox.exec(2, ["kill", "-9", *sessions])  # the connection dies under us
    node.drop_from(["192.0.2.99"])  # a fault primitive goes through anyway
    assert "-A GREGOR-IN -s 192.0.2.99/32 -j DROP" in node.exec(["iptables", "-S", "GREGOR-IN"]).stdout
    node.heal_network()
    assert node.connection.transport() is not before


def test_an_unreachable_host_is_reported_by_name(node, sandbox):
    node.exec(["true"])
    sandbox.exec(
        2, ["iptables", "-I", "INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"]
    )
    try:
        sandbox.exec(2, ["kill", "-9", *sshd_sessions(sandbox)])
        with pytest.raises(GregorError) as caught:
            node.heal_network()
        assert str(caught.value) == (
            f"n1 ({node.host.where()}): connection refused on port 22; is sshd running "
            "and listening there? (connection lost; 3 attempts to reconnect failed)"
        )
    finally:
        sandbox.exec(
            2, ["iptables", "-D", "INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"]
        )
    node.heal_network()  # and it works again once the host answers


def test_files_are_uploaded_once_and_checked(node, tmp_path):
    tree = tmp_path / "dist"
    (tree / "libs").mkdir(parents=True)
    (tree / "libs" / "a.jar").write_bytes(b"a" * 300_000)
    (tree / "start.sh").write_text("#!/bin/sh\n")
    (tree / "start.sh").chmod(0o755)
    said: list[str] = []
    first = ssh_files.provide(node.connection, str(tree), progress=said.append)
    assert len(said) == 1 and "uploading" in said[0]
    assert ssh_files.provide(node.connection, str(tree), progress=said.append) == first and len(said) == 1
    remote = node.exec(["sha256sum", f"{first}/libs/a.jar"]).stdout.split()[0]
    assert remote == hashlib.sha256(b"a" * 300_000).hexdigest()
    assert node.exec(["test", "-x", f"{first}/start.sh"], check=False).returncode == 0
    (tree / "start.sh").write_text("#!/bin/sh\necho changed\n")
    assert ssh_files.provide(node.connection, str(tree), progress=said.append) != first  # new tree, new name
    assert not node.exec(["sh", "-c", f"ls -d {first}.partial-* 2>/dev/null"], check=False).stdout


def test_a_spawned_process_outlives_its_command_and_is_found_by_its_pid(node):
    pid = node.spawn(["sleep", "300"], log=f"{node.home}/sleep.log", pid_file=f"{node.home}/sleep.pid")
    assert node.exec(["cat", f"{node.home}/sleep.pid"]).stdout.strip() == str(pid)

    def args() -> str:
        return node.exec(["ps", "-o", "args=", "-p", str(pid)], check=False).stdout.strip()

    assert wait_until(lambda: args() == "sleep 300", timeout=10), args()  # the shell's pid until it execs sleep
    node.exec(["kill", str(pid)])
