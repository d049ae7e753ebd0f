"""powerfs on its own (a real FUSE mount in a temporary directory, no cluster):
a power cut keeps exactly what was fsynced, and says what each file lost."""

import json
import mmap
import os
import subprocess
import sys
import time

import pytest

from harness import powerfs

TOOL = powerfs.__file__

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="powerfs mounts need root and /dev/fuse"
)


@pytest.fixture
def mounted(tmp_path):
    mount, backing, control = tmp_path / "data", tmp_path / "disk", tmp_path / "ctl"
    mount.mkdir()
    (mount / "old").write_bytes(b"o" * 5000)  # before the mount: durable
    log = open(tmp_path / "powerfs.log", "wb")
    daemon = subprocess.Popen(
        [sys.executable, TOOL, "serve", "--mount", str(mount), "--backing", str(backing), "--control", str(control)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    assert subprocess.run([sys.executable, TOOL, "wait", "--mount", str(mount), "--timeout", "15"]).returncode == 0
    yield mount, backing, control
    if powerfs.mounted(str(mount)):
        powerfs.unmount(str(mount))
    daemon.wait(timeout=10)


def cut(mount, control) -> dict:
    out = subprocess.run(
        [sys.executable, TOOL, "cut", "--mount", str(mount), "--control", str(control)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def write(path, data, sync):
    with open(path, "ab") as handle:
        handle.write(data)
        handle.flush()
        if sync:
            os.fsync(handle.fileno())


def test_a_power_cut_keeps_what_was_fsynced_and_loses_the_rest(mounted):
    mount, backing, control = mounted
    write(mount / "synced", b"s" * 10000, sync=True)
    write(mount / "synced", b"t" * 3000, sync=False)  # appended after the fsync: lost
    write(mount / "unsynced", b"u" * 7000, sync=False)  # never fsynced: comes back empty
    fd = os.open(mount / "old", os.O_RDWR)
    os.pwrite(fd, b"X" * 10, 100)  # durable bytes overwritten: rewound
    os.close(fd)
    os.mkdir(mount / "dir")
    write(mount / "dir" / "moved", b"m" * 100, sync=True)
    os.rename(mount / "dir" / "moved", mount / "dir" / "renamed")  # names are durable at once
    assert (mount / "unsynced").stat().st_size == 7000  # reads see unsynced data before the cut

    report = cut(mount, control)

    assert not powerfs.mounted(str(mount))
    assert (backing / "synced").read_bytes() == b"s" * 10000
    assert (backing / "unsynced").read_bytes() == b""
    assert (backing / "old").read_bytes() == b"o" * 5000
    assert (backing / "dir" / "renamed").read_bytes() == b"m" * 100
    lost = {f["file"]: f for f in report["files"]}
    assert lost["synced"]["lost_bytes"] == 3000 and lost["synced"]["kept"] == 10000
    assert lost["unsynced"]["lost_bytes"] == 7000
    assert lost["old"]["rewound_bytes"] == 10 and lost["old"]["truncated_bytes"] == 0
    assert "dir/renamed" not in lost
    assert report["lost_bytes"] == 3000 + 7000 + 10


def test_mapped_writes_count_as_synced_only_after_msync(mounted):
    mount, backing, control = mounted
    for name in ("msynced", "mapped"):
        with open(mount / name, "wb") as handle:
            handle.truncate(8192)
            os.fsync(handle.fileno())
    for name, sync in (("msynced", True), ("mapped", False)):
        with open(mount / name, "r+b") as handle:
            area = mmap.mmap(handle.fileno(), 8192)
            area[:5] = b"hello"
            if sync:
                area.flush()
            area.close()
    cut(mount, control)
    assert (backing / "msynced").read_bytes()[:5] == b"hello"
    assert (backing / "mapped").read_bytes() == bytes(8192)


def test_after_the_cut_nothing_more_reaches_the_disk(mounted, tmp_path):
    mount, backing, control = mounted
    fd = os.open(mount / "late", os.O_WRONLY | os.O_CREAT)  # a process that outlives the cut
    with socket_request(control, "cut"):
        pass
    with pytest.raises(OSError):
        os.write(fd, b"z" * 10)
    os.close(fd)
    assert (backing / "late").read_bytes() == b""


class socket_request:
    """Sends one request to the control socket (the cut, without unmounting)."""

    def __init__(self, control, request):
        import socket

        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.connect(str(control))
        self.conn.sendall((request + "\n").encode())
        self.answer = json.loads(self.conn.makefile("r").readline())

    def __enter__(self):
        return self.answer

    def __exit__(self, *exc):
        self.conn.close()
        time.sleep(0.05)
