"""The Docker backend: each node a container on a Docker network of the lab's own.

Through the Docker Engine API (the `docker` SDK): one bridge network per
lab, named and addressed like a local lab (bridge "<lab>-br", subnet from
the lab name, node i at .(10+i)), containers "gregor-<lab>-<node>" labelled
with the lab, running the locally built node image (docker_image.py) with
the capabilities iptables and tc need. A node's home (/gregor) is the host
directory /var/lib/gregor/labs/<lab>/<node>, so configs, data and logs land
where `collect` copies them from; Gregor's cache (Kafka jars and other
per-version downloads) is mounted read-only, so nothing big is copied.

Pause is a real SIGSTOP of the system's process inside the container, kill
a real SIGKILL, both through `exec` as on every backend. Client places are
network namespaces on this host with a veth on the lab's bridge, as in the
local backend, so a client cut is the same rule in its namespace.
"""

from __future__ import annotations

import io
import ipaddress
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Sequence

from ground.errors import GregorError
from ground.faults import NODE_FAULTS, WIRE
from ground.paths import cache_dir, labs_dir
from harness.backends import docker_engine, docker_image, netns
from harness.backends.bridge_places import BridgePlaces, remove_namespaces
from harness.backends.namespace_node import HARNESS_DIR, copy_node_files, copy_path, require_root
from harness.node import ExecNode

LABEL = "gregor.lab"
HOME = "/gregor"
CACHE = "/opt/gregor-cache"
TOOLS = "/opt/gregor-tools"
TOOL_FILES = ("nfqueue_netem.py",)


class DockerNode(ExecNode):
    """A node that is a container; every call goes through the Engine API."""

    def __init__(self, name: str, address: str, container: str, host_home: str, cache_root: str, client=None):
        super().__init__(name, address, HOME)
        self.container = container
        self.host_home = host_home
        self.cache_root = cache_root
        self._client = client

    @property
    def client(self):
        if self._client is None:
            self._client = docker_engine.client()
        return self._client

    def exec(self, argv: Sequence[str], *, check: bool = True, timeout: float = 30, stdin: str | None = None):
        if stdin is not None:
            raise GregorError("DockerNode.exec takes no stdin; use write_text or upload")
        import subprocess

        api = self.client.api
        try:
            exec_id = api.exec_create(self.container, ["timeout", "-s", "KILL", str(int(timeout) + 1), *argv])["Id"]
            out, err = api.exec_start(exec_id, demux=True)
            code = api.exec_inspect(exec_id)["ExitCode"]
        except Exception as error:  # noqa: BLE001 - the engine's own errors, in one line
            raise GregorError(f"{self.name}: docker exec failed: {str(error).splitlines()[0][:300]}") from None
        result = subprocess.CompletedProcess(
            list(argv), code, (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")
        )
        if check and code != 0:
            raise GregorError(
                f"{self.name}: {' '.join(argv)} exited {code}: {(result.stderr or result.stdout).strip()[:300]}"
            )
        return result

    def spawn(
        self, argv: Sequence[str], *, log: str, pid_file: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> int:
        """Starts argv in the background (the container's init reaps it);
        its pid, inside the container, goes to pid_file."""
        script = 'echo $$ > "$1"; log=$2; shift 2; exec "$@" >> "$log" 2>&1 < /dev/null'
        api = self.client.api
        exec_id = api.exec_create(
            self.container, ["sh", "-c", script, "sh", pid_file, log, *argv], environment=env or None, workdir=cwd
        )["Id"]
        api.exec_start(exec_id, detach=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = (self.read_text(pid_file) or "").strip()
            if text.isdigit():
                return int(text)
            time.sleep(0.05)
        raise GregorError(f"{self.name}: {argv[0]} did not start (no pid in {pid_file})")

    def write_text(self, path: str, text: str) -> None:
        data = text.encode()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            archive.addfile(info, io.BytesIO(data))
        self.exec(["mkdir", "-p", os.path.dirname(path)])
        self.client.api.put_archive(self.container, os.path.dirname(path), buffer.getvalue())

    def upload(self, local: str, remote: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(local, arcname=os.path.basename(remote))
        self.exec(["mkdir", "-p", os.path.dirname(remote)])
        self.client.api.put_archive(self.container, os.path.dirname(remote), buffer.getvalue())

    def download(self, remote: str, local: str) -> None:
        host = self._on_host(remote)
        if host is not None:  # our home is a host directory: no copy through the engine
            copy_path(host, local)
            return
        stream, _ = self.client.api.get_archive(self.container, remote)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            Path(local).parent.mkdir(parents=True, exist_ok=True)
            member = archive.getmembers()[0]
            if member.isdir():
                archive.extractall(os.path.dirname(local), filter="data")
                os.replace(os.path.join(os.path.dirname(local), member.name), local)
            else:
                with archive.extractfile(member) as source, open(local, "wb") as target:
                    shutil.copyfileobj(source, target)

    def _on_host(self, remote: str) -> str | None:
        if remote == HOME or remote.startswith(HOME + "/"):
            return self.host_home + remote[len(HOME) :]
        return None

    def provide(self, local_dir: str) -> str:
        """Gregor's cache is mounted read-only at /opt/gregor-cache; anything else is uploaded."""
        local = os.path.abspath(local_dir)
        if local == self.cache_root or local.startswith(self.cache_root + "/"):
            return CACHE + local[len(self.cache_root) :]
        return super().provide(local_dir)

    def tool(self, filename: str) -> list[str]:
        return [self.python, f"{TOOLS}/{filename}"]


class DockerBackend(BridgePlaces):
    """Containers through the Docker Engine API."""

    name = "docker"
    faults = frozenset(NODE_FAULTS) | {WIRE}
    wire_relay_on_nodes = True  # broker sources: the relay runs in each container (harness/wire_nodes.py)

    def __init__(self):
        self._client = None

    @property
    def client(self):
        if self._client is None:
            self._client = docker_engine.client()
        return self._client

    def can_look_without_starting(self) -> bool:
        return os.geteuid() == 0 and docker_engine.running()

    def check(self) -> None:
        require_root()  # client places are host namespaces; the lab dir is root's
        self.client.ping()

    def provision(self, lab: str, names: list[str], progress) -> dict:
        tag = docker_image.ensure_image(self.client, progress)
        subnet = netns.lab_subnet(lab)
        holder = netns.subnet_in_use(subnet, except_dev=netns.bridge_name(lab))
        if holder is not None:
            raise GregorError(f"subnet {subnet} of lab {lab!r} is already used by {holder}; choose another --lab name")
        hosts = list(subnet.hosts())
        lab_dir = labs_dir() / lab
        state = {
            "subnet": str(subnet),
            "bridge_ip": str(hosts[0]),
            "lab_dir": str(lab_dir),
            "image": tag,
            "cache_root": str(cache_dir().resolve()),
            "network": f"gregor-{lab}",
            "nodes": [
                {"name": name, "address": str(hosts[10 + i]), "container": f"gregor-{lab}-{name}"}
                for i, name in enumerate(names)
            ],
            "clients": {},
        }
        import docker

        progress(f"lab {lab}: docker network {state['network']} {subnet}, {len(names)} containers ({tag})")
        shutil.rmtree(lab_dir, ignore_errors=True)
        pool = docker.types.IPAMPool(
            subnet=str(subnet),
            gateway=state["bridge_ip"],
            iprange=str(ipaddress.IPv4Network(f"{hosts[15]}/28", strict=False)),
        )
        self.client.networks.create(
            state["network"],
            driver="bridge",
            labels={LABEL: lab},
            ipam=docker.types.IPAMConfig(pool_configs=[pool]),
            options={"com.docker.network.bridge.name": netns.bridge_name(lab)},
        )
        Path(state["cache_root"]).mkdir(parents=True, exist_ok=True)
        for node in state["nodes"]:
            home = lab_dir / node["name"]
            home.mkdir(parents=True, exist_ok=True)
            container = self.client.containers.create(
                tag,
                name=node["container"],
                hostname=node["name"],
                labels={LABEL: lab, "gregor.node": node["name"]},
                detach=True,
                init=True,
                cap_add=["NET_ADMIN", "NET_RAW"],
                network=state["network"],
                networking_config={
                    state["network"]: self.client.api.create_endpoint_config(ipv4_address=node["address"])
                },
                volumes={
                    str(home): {"bind": HOME, "mode": "rw"},
                    state["cache_root"]: {"bind": CACHE, "mode": "ro"},
                    str(HARNESS_DIR): {"bind": TOOLS, "mode": "ro"},
                },
            )
            container.start()
        for node in self.nodes(lab, state):
            node.prepare_network()
        return state

    def nodes(self, lab: str, state: dict) -> list[DockerNode]:
        return [
            DockerNode(
                n["name"],
                n["address"],
                n["container"],
                os.path.join(state["lab_dir"], n["name"]),
                state["cache_root"],
                self._client,
            )
            for n in state["nodes"]
        ]

    def collect(self, lab: str, state: dict, node, local_dir: str) -> None:
        copy_node_files(node.host_home, local_dir, skip={"data"})

    def _ours(self, lab: str):
        return self.client.containers.list(all=True, filters={"label": f"{LABEL}={lab}"})

    def stale(self, lab: str, state: dict, local_only: bool = False) -> str | None:
        """Gone when a node's container does not run, as this host's engine
        says (never starting one for the question: no engine, no containers)."""
        if not docker_engine.running():
            return "no Docker engine runs here, so neither do its containers"
        found = {container.name: container.status for container in self._ours(lab)}
        down = [
            f"{n['container']} ({found.get(n['container'], 'gone')})"
            for n in state["nodes"]
            if found.get(n["container"]) != "running"
        ]
        if down:
            return f"containers not running: {', '.join(down)}"
        return None

    def teardown(self, lab: str, state: dict | None, progress, machines_gone: bool = False) -> list[str]:
        """Containers, network and namespaces are all found on this host, so
        all of it is removed also when the lab is stale."""
        require_root()
        done = []
        containers = self._ours(lab)
        for container in containers:
            container.remove(force=True)
        if containers:
            done.append(f"{len(containers)} containers removed")
        networks = self.client.networks.list(filters={"label": f"{LABEL}={lab}"})
        for network in networks:
            network.remove()
        if networks:
            done.append(f"network {', '.join(n.name for n in networks)} removed")
        spaces = remove_namespaces(lab, keep=(netns.bridge_name(lab),))  # Docker removes its bridge
        if spaces:
            done.append(f"{spaces} client namespaces removed")
        lab_dir = Path((state or {}).get("lab_dir") or labs_dir() / lab)
        if lab_dir.exists():
            shutil.rmtree(lab_dir, ignore_errors=True)
            done.append(f"{lab_dir} removed")
        return done

    def leftovers(self, lab: str) -> list[str]:
        found = [f"container {c.name}" for c in self._ours(lab)]
        found += [f"network {n.name}" for n in self.client.networks.list(filters={"label": f"{LABEL}={lab}"})]
        found += [f"namespace {ns}" for ns in netns.namespaces() if ns.startswith(f"{lab}-")]
        if (labs_dir() / lab).exists():
            found.append(f"dir {labs_dir() / lab}")
        return found

    def busy(self, lab: str) -> bool:
        return bool(self._ours(lab)) or bool(self.client.networks.list(filters={"label": f"{LABEL}={lab}"}))
