"""A login user that is not root: Gregor runs every command through `sudo -n`,
uploads into that user's own cache, and says so in one line when the user
may not use sudo without a password. Debian's real sudo, installed into one
host from its .deb (apt-get download, beside SSH)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from backend_params import lab_name

from ground.errors import GregorError
from harness.backends import ssh_files
from harness.backends.ssh import SshBackend

pytestmark = pytest.mark.lab

LAB = lab_name("ssu")
HOST = 0


def add_user(sandbox, user: str, sudo: bool) -> None:
    login = Path(sandbox.key_file + ".pub").read_bytes()
    sandbox.exec(HOST, ["useradd", "--create-home", "--shell", "/bin/sh", user])
    sandbox.put(HOST, {f"/home/{user}/.ssh/authorized_keys": (login, 0o600)})
    sandbox.exec(HOST, ["chown", "-R", f"{user}:{user}", f"/home/{user}/.ssh"])
    if sudo:
        sandbox.put(HOST, {f"/etc/sudoers.d/{user}": (f"{user} ALL=(ALL) NOPASSWD: ALL\n".encode(), 0o440)})


@pytest.fixture(scope="module")
def users(sandbox, tmp_path_factory):
    """`lab` may use sudo without a password, `guest` may not."""
    debs = tmp_path_factory.mktemp("debs")
    got = subprocess.run(["apt-get", "download", "sudo"], cwd=debs, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, f"apt-get download sudo: {got.stderr.strip()[-300:]}"
    deb = next(debs.glob("sudo_*.deb"))
    sandbox.put(HOST, {"/var/tmp/sudo.deb": (deb.read_bytes(), 0o644)})
    sandbox.exec(HOST, ["dpkg", "-i", "/var/tmp/sudo.deb"])
    add_user(sandbox, "lab", sudo=True)
    add_user(sandbox, "guest", sudo=False)
    yield
    for user in ("lab", "guest"):
        sandbox.exec(HOST, ["userdel", "--remove", user])
    sandbox.exec(
        HOST, ["sh", "-c", "rm -f /etc/sudoers.d/lab /var/tmp/sudo.deb && SUDO_FORCE_REMOVE=yes dpkg --purge sudo"]
    )


def backend(sandbox, user: str) -> SshBackend:
    return SshBackend(**{**sandbox.options(), "hosts": f"{user}@{sandbox.hosts[HOST].host}"})


def test_a_sudo_user_runs_everything_as_root_and_leaves_nothing(users, sandbox, tmp_path):
    ssh = backend(sandbox, "lab")
    state = ssh.provision(LAB, ["n1"], print)
    try:
        node = ssh.nodes(LAB, state)[0]
        assert node.exec(["id", "-u"]).stdout.strip() == "0"
        node.drop_from(["192.0.2.7"])
        assert "-A GREGOR-IN -s 192.0.2.7/32 -j DROP" in node.exec(["iptables", "-S", "GREGOR-IN"]).stdout
        node.heal_network()
        (tmp_path / "tree").mkdir()
        (tmp_path / "tree" / "file").write_text("x")
        cached = ssh_files.provide(node.connection, str(tmp_path / "tree"))
        assert cached.startswith("/home/lab/.cache/gregor/files/")
        pid = node.spawn(["sleep", "300"], log=f"{node.home}/s.log", pid_file=f"{node.home}/s.pid")
        assert node.exec(["ps", "-o", "user=", "-p", str(pid)]).stdout.strip() == "root"
    finally:
        ssh.teardown(LAB, state, print)
    assert ssh.leftovers(LAB) == []


def test_a_user_without_passwordless_sudo_is_told_in_one_line(users, sandbox):
    with pytest.raises(GregorError) as caught:
        backend(sandbox, "guest").provision(LAB, ["n1"], print)
    assert str(caught.value) == (
        f"n1 (guest@{sandbox.hosts[HOST].host}:22): guest cannot run commands as root "
        "without a password (sudo -n); log in as root or allow passwordless sudo there"
    )
