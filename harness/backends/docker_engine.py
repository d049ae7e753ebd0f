"""Finding the Docker Engine, and starting Debian's dockerd when none runs.

Gregor starts dockerd itself (and says so in one line) rather than asking
the user to. Before it does, it turns IP forwarding on: dockerd sets the
host's iptables FORWARD policy to DROP when it has to turn forwarding on
itself (moby#28257), which would cut off the bridged namespaces of a local
lab running beside it. Local labs also add an ACCEPT rule for their own
bridge, for an engine someone else started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

from ground.errors import GregorError
from ground.paths import state_dir
from ground.procfs import proc_cmdline

SOCKET = "/var/run/docker.sock"
PIDFILE = Path("/var/run/docker.pid")
START_TIMEOUT_S = 60


def _connect(timeout: float = 30):
    import docker

    return docker.DockerClient(base_url=os.environ.get("DOCKER_HOST") or f"unix://{SOCKET}", timeout=timeout)


def running() -> bool:
    """Whether an engine answers (never starts one)."""
    try:
        _connect(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no engine answers"
        return False


def client(progress: Callable[[str], None] = print):
    """A client of a running engine; dockerd is started here if none runs."""
    try:
        import docker  # noqa: F401
    except ImportError:
        raise GregorError("the docker Python package is missing; run ./setup (pip install docker)") from None
    if running():
        return _connect()
    if os.environ.get("DOCKER_HOST"):
        raise GregorError(f"no Docker engine answers at DOCKER_HOST={os.environ['DOCKER_HOST']}; start it or unset it")
    if shutil.which("dockerd") is None:
        raise GregorError(
            "Docker is not installed: no engine runs and there is no dockerd; "
            "install Debian's docker.io (apt-get install docker.io, or run ./setup)"
        )
    if os.geteuid() != 0:
        raise GregorError("no Docker engine runs, and starting dockerd needs root; run with sudo")
    log = state_dir() / "dockerd.log"
    progress(f"docker: no engine running; starting dockerd (it keeps running; log {log})")
    _start_dockerd(log)
    return _connect()


def _start_dockerd(log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    enable_forwarding()
    clear_stale_pidfile()
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["dockerd", "--host", f"unix://{SOCKET}"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if running():
            return
        if process.poll() is not None:
            break
        time.sleep(0.25)
    why = _last_error(log)
    if process.poll() is None:
        process.kill()
        raise GregorError(f"dockerd did not answer within {START_TIMEOUT_S} s: {why} (log {log})")
    raise GregorError(f"dockerd could not start: {why} (log {log})")


def clear_stale_pidfile(pidfile: Path | None = None) -> None:
    """Removes the pid file of a dockerd that is gone.

    dockerd refuses to start while its pid file names a live process, and
    after a crash or a machine image snapshot that pid may belong to any
    other process by now. A pid file whose process is a live dockerd stays:
    that engine is still starting, or answers elsewhere, and is not ours.
    """
    pidfile = pidfile or PIDFILE
    try:
        text = pidfile.read_text().strip()
    except FileNotFoundError:
        return
    except OSError:
        text = ""
    argv = proc_cmdline(int(text)) if text.isdigit() else []
    if argv and Path(argv[0]).name == "dockerd":
        raise GregorError(
            f"a dockerd (pid {text}) runs but does not answer on {SOCKET}; "
            f"wait for it, or stop it (kill {text}) and retry"
        )
    pidfile.unlink(missing_ok=True)


def _last_error(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if "level=error" in line or "level=fatal" in line or "failed" in line.lower():
            return line.split('msg="', 1)[-1].rstrip('"')[:300]
    return lines[-1][:300] if lines else "no output"


def enable_forwarding() -> None:
    """IP forwarding on, before dockerd would turn it on and close FORWARD."""
    path = Path("/proc/sys/net/ipv4/ip_forward")
    try:
        if path.read_text().strip() != "1":
            path.write_text("1\n")
    except OSError:
        pass  # read-only /proc/sys: dockerd decides, and local labs' ACCEPT rules still hold
