"""Whether an SSH lab's machines are still there, from this host alone
(harness/backends/ssh_alive.py, SshBackend.stale): no hosts needed, and no
connection is opened when the local evidence already says they are gone."""

from __future__ import annotations

import os

from harness.backends import ssh_alive
from harness.backends.ssh import SshBackend, _pool
from harness.backends.ssh_hosts import SshHost


def test_the_route_to_an_address_names_its_interface():
    assert ssh_alive.route_device("127.0.0.1") == "lo"
    assert ssh_alive.routes(["127.0.0.1", "db.example.org"]) == {"127.0.0.1": "lo"}  # names are not looked up


def test_a_route_that_left_elsewhere_at_lab_up_is_a_gone_network():
    assert ssh_alive.moved_routes({"127.0.0.1": "lo"}) is None
    why = ssh_alive.moved_routes({"127.0.0.1": "br-1234"})
    assert "127.0.0.1 via lo (was br-1234)" in why and "network its machines were on is gone" in why


def fake_vagrant(tmp_path, monkeypatch, lines: list[str], code: int = 0) -> str:
    """A `vagrant` that prints these machine-readable lines (its caller's parsing is what is tested)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vagrant"
    script.write_text(
        "#!/bin/sh\n"
        + 'echo "$VAGRANT_DOTFILE_PATH $GREGOR_VAGRANT_LOOK" > "$(dirname "$0")/environment"\n'
        + "".join(f"echo '{line}'\n" for line in lines)
        + f"exit {code}\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "Vagrantfile").write_text("# the lab's\n")
    return str(lab)


def test_vagrant_machines_that_are_not_running_are_named(tmp_path, monkeypatch):
    lab = fake_vagrant(
        tmp_path,
        monkeypatch,
        [
            "1700000000,n1,metadata,provider,docker",
            "1700000000,n1,state,running",
            "1700000000,n2,state,not_created",
            "1700000000,n2,state-human-short,not created",
            "1700000000,n3,state,stopped",
            "1700000000,,ui,info,Current machine states:",
        ],
    )
    assert ssh_alive.vagrant_states(lab, "/d/.vagrant") == {"n1": "running", "n2": "not_created", "n3": "stopped"}
    assert (tmp_path / "bin" / "environment").read_text().split() == ["/d/.vagrant", "1"]  # its folder; only a look
    assert ssh_alive.vagrant_not_running(lab, ["n1"], None) is None
    why = ssh_alive.vagrant_not_running(lab, ["n1", "n2", "n3"], None)
    assert why == f"the Vagrant machines n2, n3 in {lab} are not running (vagrant status: not created, stopped)"


def test_a_vagrant_lab_that_vagrant_cannot_describe_is_not_shown_alive(tmp_path, monkeypatch):
    lab = fake_vagrant(tmp_path, monkeypatch, ["oops"], code=1)
    assert "vagrant status in" in ssh_alive.vagrant_not_running(lab, ["n1"], None)
    assert "has no Vagrantfile any more" in ssh_alive.vagrant_not_running(str(tmp_path), ["n1"], None)


def test_a_moved_route_makes_the_lab_stale_before_any_connection(tmp_path):
    host = SshHost(user="root", host="127.0.0.1", port=1, key_file=str(tmp_path / "no-key"))
    state = {
        "nodes": [{"name": "n1", "address": "127.0.0.1", "device": "lo", "home": "/x"}],
        "hosts": [host.to_json()],
        "routes": {"127.0.0.1": "eth7"},
    }
    backend = SshBackend(hosts=host.where(), insecure_host_keys=True)
    assert "127.0.0.1 via lo (was eth7)" in backend.stale("lab", state)
    assert not [key for key in _pool if key[0] == host], "a connection was opened"
    state["routes"] = {"127.0.0.1": "lo"}
    assert backend.stale("lab", state, local_only=True) is None
    assert "connection refused on port 1" in backend.stale("lab", state)  # then the handshake decides
