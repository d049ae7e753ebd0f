"""Where the SSH backend's hosts come from: `--hosts user@host[:port],...` or
`vagrant ssh-config` of a Vagrant lab (`--vagrant DIR`).

Both give the same thing, one `SshHost` per node: whom to log in as, where,
with which key, and which host key to trust. Host names and users are
untrusted text (they reach shell commands and error messages), so they are
checked here against what a host name or a login name can be.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from ground.errors import GregorError

USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$", re.I)
HOST = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", re.I)  # a DNS name or an IPv4 address
VAGRANT_TIMEOUT_S = 120
# Written by the lab's own Vagrantfile (vagrant/README.md) into Vagrant's state
# folder: each machine's host key, made on this host before the machine first
# boots (so it is known here without trusting what the network says on first
# contact), and its address on the lab's private network.
VAGRANT_KEYS = "gregor"


@dataclass(frozen=True)
class SshHost:
    """One node's SSH login: user@host:port, a key file, the host key to expect."""

    user: str
    host: str
    port: int = 22
    key_file: str | None = None  # a private key file (never its content)
    host_key: str | None = None  # "type base64" this host must present (Vagrant labs); else known_hosts
    machine: str | None = None  # the Vagrant machine's name
    address: str | None = None  # the node's cluster address when it is not `host` (Vagrant labs)

    def where(self) -> str:
        """user@host:port, as messages and the report show it."""
        return f"{self.user}@{self.host}:{self.port}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "SshHost":
        return cls(**data)


def parse_hosts(text: str, key_file: str | None = None) -> list[SshHost]:
    """`user@host[:port],...` (user defaults to root, port to 22)."""
    hosts = []
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        user, at, rest = item.rpartition("@")
        user = user if at else "root"
        host, colon, port = rest.partition(":")
        if not USER.match(user):
            raise GregorError(f"--hosts: bad user name {user!r} in {item!r}")
        if not HOST.match(host):
            raise GregorError(
                f"--hosts: bad host name {host!r} in {item!r}; give user@host[:port] (an IPv4 address or a DNS name)"
            )
        if colon and not (port.isdigit() and 0 < int(port) < 65536):
            raise GregorError(f"--hosts: bad port {port!r} in {item!r}")
        hosts.append(SshHost(user=user, host=host, port=int(port) if colon else 22, key_file=key_file))
    if not hosts:
        raise GregorError("--hosts names no host; give user@host[:port],... (one per node)")
    seen = set()
    for host in hosts:
        if (host.host, host.port) in seen:
            raise GregorError(f"--hosts names {host.host}:{host.port} twice; each node needs a host of its own")
        seen.add((host.host, host.port))
    return hosts


def parse_ssh_config(text: str) -> dict[str, dict[str, str]]:
    """`vagrant ssh-config` output, read by paramiko's own ssh_config parser:
    each named host's settings, keys lowercased (the first IdentityFile where
    several are given)."""
    import paramiko

    config = paramiko.SSHConfig.from_text(text)
    blocks = {}
    for host in sorted(config.get_hostnames()):
        if any(mark in host for mark in "*?!"):  # a pattern, not a machine
            continue
        blocks[host] = {
            key: value[0] if isinstance(value, list) else value for key, value in config.lookup(host).items()
        }
    return blocks


def vagrant_hosts(directory: str, key_file: str | None = None) -> list[SshHost]:
    """The running machines of the Vagrant lab in `directory`, in name order
    (n1, n2, ..., n10), from `vagrant ssh-config`; --ssh-key, if given, wins
    over the key Vagrant names."""
    directory = os.path.abspath(directory)
    if not os.path.isfile(os.path.join(directory, "Vagrantfile")):
        raise GregorError(f"--vagrant {directory}: no Vagrantfile there; give the directory of the lab's Vagrantfile")
    try:
        result = subprocess.run(
            ["vagrant", "ssh-config"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=VAGRANT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GregorError("vagrant not found; install Debian's vagrant package (./setup does)") from None
    except subprocess.TimeoutExpired:
        raise GregorError(f"vagrant ssh-config in {directory} did not answer within {VAGRANT_TIMEOUT_S} s") from None
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        raise GregorError(
            f"vagrant ssh-config in {directory} failed: {' '.join(lines)[:300] or 'no output'}; "
            f"is the lab up? (cd {shlex.quote(directory)} && vagrant up)"
        )
    blocks = parse_ssh_config(result.stdout)
    if not blocks:
        raise GregorError(f"vagrant ssh-config in {directory} lists no machine; run vagrant up there first")
    hosts = []
    ours = Path(directory) / os.environ.get("VAGRANT_DOTFILE_PATH", ".vagrant") / VAGRANT_KEYS
    for machine in sorted(blocks, key=_natural):
        block = blocks[machine]
        host_key_file = ours / machine / "ssh_host_ed25519_key.pub"
        address_file = ours / machine / "address"
        port = block.get("port", "22")
        hosts.append(
            SshHost(
                user=block.get("user", "vagrant"),
                host=block.get("hostname", machine),
                port=int(port) if port.isdigit() else 22,
                key_file=key_file or _path(block.get("identityfile")),
                host_key=" ".join(host_key_file.read_text().split()[:2]) if host_key_file.is_file() else None,
                machine=machine,
                address=address_file.read_text().strip() if address_file.is_file() else None,
            )
        )
    for host in hosts:  # what Vagrant wrote is checked like what a user typed
        parse_hosts(f"{host.user}@{host.host}:{host.port}")
    return hosts


def _path(value: str | None) -> str | None:
    if not value:
        return None
    return os.path.expanduser(value.strip('"'))


def _natural(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
