"""Where the wire relay sits: the network namespaces it serves, its REDIRECT rules there, and the
sweep that removes both after a crash.

Why apart: this is the only part that touches the host (setns, iptables, /proc); the relay's loop
only asks a Space for its listener and to be entered while it opens an upstream socket.

Every rule carries the comment "gregor-wire:<tag>" and every relay process "--tag <tag>" on its
command line, so `python -m harness.wire.relay sweep --tag T` finds them whether the relay stopped cleanly or not.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import socket
import subprocess
import time

RELAY_MARK = 0x4757  # the relay's own connections carry it; the REDIRECT rule skips it
COMMENT = "gregor-wire:"
ZIPAPP = "gregor-wire.pyz"  # the package as one file, as shipped to a node (harness/wire_nodes.py)
CLONE_NEWNET = 0x40000000


def default_control(tag: str) -> str:
    return f"/tmp/gregor-wire-{tag}.sock"


def remove_stale_socket(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_libc = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


class Space:
    """A network namespace the relay serves: its listener on 127.0.0.1 there (where its REDIRECT rules
    send the namespace's connections), and a way in, to open upstream sockets and run iptables there.
    One relay process may serve many (one wake-up then serves them all); name None is its own."""

    home: int | None = None  # the relay's own namespace, to come back to

    def __init__(self, name: str | None, port: int):
        self.name = name
        self.fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY) if name else None
        with self.entered():
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(1024)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]

    def entered(self):
        return _Entered(self.fd)

    def close(self) -> None:
        self.listener.close()
        if self.fd is not None:
            os.close(self.fd)


class _Entered:
    """`with space.entered():` runs the block (socket(), iptables) in that namespace."""

    def __init__(self, fd: int | None):
        self.fd = fd

    def __enter__(self):
        if self.fd is not None:
            if Space.home is None:
                Space.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            _setns(self.fd)

    def __exit__(self, *exc):
        if self.fd is not None:
            _setns(Space.home)


def redirect_spec(tag: str, dest: tuple[str | None, int], port: int) -> list[str]:
    host, dport = dest
    spec = [
        "OUTPUT",
        "-p",
        "tcp",
        *(["-d", host] if host else []),
        "--dport",
        str(dport),
        "-m",
        "mark",
        "!",
        "--mark",
        hex(RELAY_MARK),
        "-m",
        "comment",
        "--comment",
        f"{COMMENT}{tag}",
        "-j",
        "REDIRECT",
        "--to-ports",
        str(port),
    ]
    return spec


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["iptables", "-w", "-t", "nat", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode:
        raise OSError(f"iptables {' '.join(args)}: {result.stderr.strip()}")
    return result


def add_redirects(tag: str, dests: list[tuple[str | None, int]], port: int) -> None:
    for dest in dests:
        spec = redirect_spec(tag, dest, port)
        _iptables("-I", spec[0], "1", *spec[1:])


def tagged_rules(tag: str, prefix: bool = False) -> list[list[str]]:
    """The nat rules of this namespace that carry `tag` (prefix: any tag starting with it), as -A argument lists."""
    out = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, timeout=30).stdout
    found = []
    for line in out.splitlines():
        if not line.startswith("-A "):
            continue
        words = shlex.split(line)
        if "--comment" not in words:
            continue
        comment = words[words.index("--comment") + 1]
        if not comment.startswith(COMMENT):
            continue
        served = comment[len(COMMENT) :]
        if served == tag or (prefix and served.startswith(tag)):
            found.append(words[1:])
    return found


def remove_redirects(tag: str, prefix: bool = False) -> int:
    rules = tagged_rules(tag, prefix)
    for words in rules:
        _iptables("-D", *words, check=False)
    return len(rules)


def relays(tag: str, prefix: bool = False) -> list[int]:
    """Pids of relays serving `tag` (prefix: every tag starting with it), found in /proc (a crashed run's too)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
        except OSError:
            continue
        if "serve" not in argv or "--tag" not in argv[:-1] or not _is_relay(argv):
            continue
        served = argv[argv.index("--tag") + 1]
        if served == tag or (prefix and served.startswith(tag)):
            found.append(int(entry))
    return found


def _is_relay(argv: list[str]) -> bool:
    """A relay's command line: the module or file, or the package or zipapp followed by "relay"."""
    for index, arg in enumerate(argv):
        if arg.endswith("wire/relay.py") or arg.endswith(".wire.relay"):
            return True
        if (arg.endswith(ZIPAPP) or arg.endswith("harness.wire")) and argv[index + 1 : index + 2] == ["relay"]:
            return True
    return False


def _running(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def sweep(tag: str, prefix: bool = False, netns: list[str] | None = None) -> dict:
    """Ends the tag's relays (SIGTERM, then SIGKILL), then removes its REDIRECT rules in this namespace
    and in each of `netns`."""
    pids = relays(tag, prefix)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.05)
    killed = 0
    for pid in pids:
        if _running(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    removed = remove_redirects(tag, prefix)
    for name in netns or []:
        if os.path.exists(f"/var/run/netns/{name}"):
            fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
            try:
                with _Entered(fd):
                    removed += remove_redirects(tag, prefix)
            finally:
                os.close(fd)
    if not prefix:
        remove_stale_socket(default_control(tag))
    return {"relays": len(pids), "killed": killed, "redirects_removed": removed}
