"""The SSH backend's options, host lists and `vagrant ssh-config` parsing (no hosts needed)."""

from __future__ import annotations

import argparse

import pytest

from ground.errors import GregorError
from harness.backends.ssh_hosts import SshHost, parse_hosts, parse_ssh_config
from harness.cli import main
from harness.controller.lab_options import add_lab_arguments, backend_flags, backend_options


def parsed(*argv: str):
    parser = argparse.ArgumentParser()
    add_lab_arguments(parser)
    return parser.parse_args(list(argv))


def test_hosts_take_user_host_and_port_with_defaults():
    hosts = parse_hosts("root@10.0.0.11, admin@db2.example.org:2222,10.0.0.13", key_file="/k")
    assert [h.where() for h in hosts] == ["root@10.0.0.11:22", "admin@db2.example.org:2222", "root@10.0.0.13:22"]
    assert all(h.key_file == "/k" for h in hosts)


@pytest.mark.parametrize(
    "text, says",
    [
        ("root@10.0.0.1;reboot", "bad host name"),
        ("ro ot@10.0.0.1", "bad user name"),
        ("$(id)@10.0.0.1", "bad user name"),
        ("root@10.0.0.1:99999", "bad port"),
        ("root@-oProxyCommand=x", "bad host name"),
        ("root@10.0.0.1,root@10.0.0.1", "twice"),
        (" , ", "names no host"),
    ],
)
def test_untrusted_host_lists_are_refused_in_one_line(text, says):
    with pytest.raises(GregorError, match=says) as caught:
        parse_hosts(text)
    assert "\n" not in str(caught.value)


def test_vagrant_ssh_config_blocks():
    text = """Host n1
  HostName 172.17.0.2
  User root
  Port 22
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  IdentityFile "/home/a b/.vagrant/gregor/id_ed25519"

Host n2
  HostName 127.0.0.1
  User vagrant
  Port 2200
"""
    blocks = parse_ssh_config(text)
    assert blocks["n1"]["identityfile"] == "/home/a b/.vagrant/gregor/id_ed25519"
    assert blocks["n2"] == {"hostname": "127.0.0.1", "user": "vagrant", "port": "2200"}


def test_ssh_options_reach_the_backend_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = parsed("--backend", "ssh", "--hosts", "root@10.0.0.1", "--ssh-key", "key", "--insecure-host-keys")
    options = backend_options(args)
    assert options == {"hosts": "root@10.0.0.1", "ssh_key": str(tmp_path / "key"), "insecure_host_keys": True}
    assert backend_flags(options) == [
        "--hosts",
        "root@10.0.0.1",
        "--ssh-key",
        str(tmp_path / "key"),
        "--insecure-host-keys",
    ]
    assert backend_options(parsed("--backend", "local")) == {}


def test_an_ssh_option_without_the_ssh_backend_is_refused(capsys):
    assert main(["lab", "up", "--lab", "sx", "--hosts", "root@10.0.0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gregor: error: --hosts is an option of the ssh backend; add --backend ssh"


def test_the_ssh_backend_without_hosts_says_how_to_give_them(capsys):
    assert main(["lab", "up", "--lab", "sx", "--backend", "ssh"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--hosts user@host[:port]" in err and "--vagrant DIR" in err and "\n" not in err


def test_describe_names_hosts_and_key_checking_but_no_key(tmp_path):
    from harness.backends.ssh import SshBackend

    backend = SshBackend(hosts="root@10.0.0.1", ssh_key=str(tmp_path / "secret_key"), insecure_host_keys=True)
    state = {
        "hosts": [SshHost("root", "10.0.0.1", key_file=str(tmp_path / "secret_key")).to_json()],
        "nodes": [{"name": "n1", "address": "10.0.0.1"}],
    }
    described = backend.describe(state)
    assert described == {"hosts": "n1 root@10.0.0.1:22", "host_keys": "NOT verified (--insecure-host-keys)"}
    assert "secret_key" not in str(described)


def test_the_report_says_when_host_keys_were_not_checked(tmp_path):
    from reports.render import setup_section
    from reports.stored_run import Run

    setup = {"backend": "ssh", "hosts": "n1 root@10.0.0.1:22 <b>", "host_keys": "NOT verified (--insecure-host-keys)"}
    html = setup_section(Run(directory=tmp_path, test={"setup": setup, "backend": "ssh"}, results={}))
    assert "SSH host keys" in html and "NOT verified (--insecure-host-keys)" in html
    assert "n1 root@10.0.0.1:22 &lt;b&gt;" in html  # host names are untrusted text


def test_the_demo_passes_the_ssh_options_on_to_its_run():
    from harness.controller import run_cli
    from harness.controller.demo import demo_arguments

    argv = demo_arguments(
        60, "sdemo", None, "store", backend="ssh", backend_options={"vagrant": "/labs/v", "insecure_host_keys": True}
    )
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    cfg = run_cli.validate(parser.parse_args(argv))
    assert cfg.backend == "ssh" and cfg.backend_options == {"vagrant": "/labs/v", "insecure_host_keys": True}
