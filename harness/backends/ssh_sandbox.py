"""Throwaway SSH hosts: containers of the Docker backend's node image running OpenSSH's sshd.

For the SSH backend's tests and benchmark, which need real hosts with real
sshd, iptables, /proc and a JVM, without VMs (the Vagrant lab's docker
provider makes the same kind of host for users). The host key and the login
key are made here with ssh-keygen and put into each container before it
starts, so the known_hosts file written here is true from the first
connection on: nothing is trusted on first use.

    sandbox = start("sbox", 3, "/tmp/sbox")   # root@172.x.y.2:22 ...
    gregor lab up --backend ssh {sandbox.flags()}
    stop("sbox")
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ground.errors import GregorError
from harness.backends.ssh_hosts import SshHost

LABEL = "gregor.sshhosts"
SSHD = [
    "/usr/sbin/sshd",
    "-D",
    "-e",
    "-h",
    "/etc/ssh/ssh_host_ed25519_key",
    "-o",
    "PermitRootLogin=prohibit-password",
    "-o",
    "PasswordAuthentication=no",
]


@dataclass
class Sandbox:
    name: str
    directory: str
    hosts: list[SshHost] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)

    @property
    def key_file(self) -> str:
        return os.path.join(self.directory, "id_ed25519")

    @property
    def known_hosts(self) -> str:
        return os.path.join(self.directory, "known_hosts")

    def options(self) -> dict:
        """The SSH backend's options for these hosts (registry.backend("ssh", **options))."""
        return {
            "hosts": ",".join(h.where() for h in self.hosts),
            "ssh_key": self.key_file,
            "known_hosts": self.known_hosts,
        }

    def flags(self) -> list[str]:
        return [
            "--backend",
            "ssh",
            "--hosts",
            self.options()["hosts"],
            "--ssh-key",
            self.key_file,
            "--known-hosts",
            self.known_hosts,
        ]

    def container(self, index: int):
        """Host `index`'s container, to reach it beside SSH (to break or inspect it)."""
        from harness.backends import docker_engine

        return docker_engine.client(progress=lambda _m: None).containers.get(self.containers[index])

    def exec(self, index: int, argv: list[str]) -> str:
        """A command in host `index`'s container, beside SSH."""
        code, out = self.container(index).exec_run(argv)
        if code != 0:
            raise GregorError(f"{self.containers[index]}: {' '.join(argv)} exited {code}: {out.decode()[:200]}")
        return out.decode()

    def put(self, index: int, files: dict[str, tuple[bytes, int]]) -> None:
        """Files {path: (content, mode)} into host `index`, beside SSH."""
        self.container(index).put_archive("/", _archive(files))


def keygen(path: str, comment: str) -> str:
    """An ed25519 key pair without passphrase; returns the public line."""
    if shutil.which("ssh-keygen") is None:
        raise GregorError("ssh-keygen not found; install Debian's openssh-client (./setup does)")
    Path(path).unlink(missing_ok=True)
    Path(path + ".pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path], check=True, capture_output=True
    )
    return Path(path + ".pub").read_text().strip()


def _archive(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of {path: (content, mode)}, owned by root (Docker makes missing folders, 0755)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def start(name: str, count: int, directory: str, progress: Callable[[str], None] = lambda _m: None) -> Sandbox:
    """`count` hosts "gregor-ssh-<name>-<i>" on a Docker network of their own."""
    from harness.backends import docker_engine, docker_image

    client = docker_engine.client(progress=progress)
    tag = docker_image.ensure_image(client, progress)
    stop(name)
    os.makedirs(directory, exist_ok=True)
    sandbox = Sandbox(name, directory)
    login = keygen(sandbox.key_file, f"gregor-sandbox-{name}")
    network = client.networks.create(f"gregor-ssh-{name}", driver="bridge", labels={LABEL: name})
    known = []
    for index in range(count):
        container_name = f"gregor-ssh-{name}-{index + 1}"
        host_key = os.path.join(directory, f"host{index + 1}")
        public = keygen(host_key, container_name)
        container = client.containers.create(
            tag,
            command=SSHD,
            name=container_name,
            hostname=f"h{index + 1}",
            labels={LABEL: name},
            detach=True,
            init=True,
            cap_add=["NET_ADMIN", "NET_RAW"],
            network=network.name,
        )
        container.put_archive(
            "/",
            _archive(
                {
                    "/etc/ssh/ssh_host_ed25519_key": (Path(host_key).read_bytes(), 0o600),
                    "/root/.ssh/authorized_keys": (login.encode() + b"\n", 0o600),
                }
            ),
        )
        container.start()
        container.reload()
        address = container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        sandbox.hosts.append(SshHost(user="root", host=address, key_file=sandbox.key_file))
        sandbox.containers.append(container_name)
        known.append(f"{address} {' '.join(public.split()[:2])}\n")
    Path(sandbox.known_hosts).write_text("".join(known))
    _wait_listening(sandbox)
    return sandbox


def _wait_listening(sandbox: Sandbox, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    for host in sandbox.hosts:
        while True:
            try:
                socket.create_connection((host.host, host.port), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise GregorError(f"sshd on {host.where()} did not start listening within {timeout:g} s") from None
                time.sleep(0.1)


def stop(name: str) -> list[str]:
    """Removes the sandbox's containers and network; what was removed."""
    from harness.backends import docker_engine

    client = docker_engine.client(progress=lambda _m: None)
    done = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={name}"}):
        container.remove(force=True)
        done.append(f"container {container.name}")
    for network in client.networks.list(filters={"label": f"{LABEL}={name}"}):
        network.remove()
        done.append(f"network {network.name}")
    return done
