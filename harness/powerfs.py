"""powerfs: a file system that can lose power (runs ON the node, one per data directory).

A passthrough FUSE file system (mfusepy over Debian's libfuse3) that serves a
backing directory at the system's data directory and remembers, for every
file, what of its content is durable: the content it had when the file
system was mounted or when the file was last fsynced (fsync/fdatasync). A
power cut (`powerfs.py cut`) stops the file system from accepting anything
more and rolls every file back to its durable content, as a machine that
loses power loses what sat in the page cache; then the mount goes away.

The model, in the spirit of Jepsen's lazyfs:
  - file content (bytes and length) is durable up to the file's last fsync;
    a file created and never fsynced comes back empty;
  - namespace operations (create, unlink, rename, mkdir, rmdir, link) are
    durable at once, as on a journaling file system whose journal has
    committed: the loss is the data, not the names.

Writes go straight through to the backing file (reads see them, and a
process crash loses nothing, as with a real page cache); before the first
overwrite of durable bytes since the last fsync the old block is saved, so
the cut can put it back. fsync marks content durable without a real fsync:
the backing directory is on a disk that does not lose power.

Commands (all print one line; `cut` prints the report as JSON):
  powerfs.py serve --mount M --backing B --control SOCK   (foreground daemon)
  powerfs.py wait  --mount M [--timeout S]                 (until M is served)
  powerfs.py cut   --mount M --control SOCK                (power cut, then unmount)
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

BLOCK = 4096
FSNAME = "powerfs"
OPEN_FLAGS_DROPPED = os.O_APPEND | os.O_CREAT | os.O_EXCL  # the kernel gives offsets; we pwrite


class Durable:
    """What of one file survives a power cut: its first `size` bytes, with the
    blocks saved in `saved` (index -> bytes) put back over what overwrote them."""

    __slots__ = ("size", "saved")

    def __init__(self, size: int):
        self.size = size
        self.saved: dict[int, bytes] = {}

    def save_before_change(self, fd: int, start: int, end: int) -> None:
        """Keeps the durable bytes of [start, end) that are about to change."""
        stop = min(end, self.size)
        if start >= stop:
            return
        for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
            if block not in self.saved:
                offset = block * BLOCK
                self.saved[block] = os.pread(fd, min(BLOCK, self.size - offset), offset)


def rollback(path: str, durable: Durable) -> tuple[int, int, int]:
    """Puts a backing file back to its durable content; (size before, bytes
    cut off the end, durable bytes rewound to their old content)."""
    fd = os.open(path, os.O_RDWR)
    try:
        before = os.fstat(fd).st_size
        os.ftruncate(fd, durable.size)
        rewound = 0
        for block, data in sorted(durable.saved.items()):
            offset = block * BLOCK
            data = data[: max(0, durable.size - offset)]
            current = os.pread(fd, len(data), offset)
            if data and current != data:
                os.pwrite(fd, data, offset)
                rewound += sum(1 for old, new in zip(data, current) if old != new) + len(data) - len(current)
    finally:
        os.close(fd)
    return before, max(0, before - durable.size), rewound


def stat_dict(st: os.stat_result) -> dict:
    keys = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")
    out = {k: getattr(st, k) for k in keys}
    out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
    return out


def make_filesystem(backing: str):
    """The Operations class, built here so that `cut` and `wait` run without mfusepy."""
    from mfusepy import FuseOSError, Operations

    class PowerFS(Operations):
        use_ns = True

        def __init__(self):
            self.root = os.path.realpath(backing)
            self.mutex = threading.RLock()  # not `lock`: that name is FUSE's POSIX-lock operation
            self.files: dict[int, Durable] = {}  # backing inode -> its durable content
            self.inodes: dict[int, int] = {}  # open fd -> backing inode
            self.cut = False

        # --- helpers -------------------------------------------------------
        def real(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def durable(self, ino: int, fd: int | None = None, path: str | None = None) -> Durable:
            found = self.files.get(ino)
            if found is None:  # first change since the mount or the last fsync: all of it is durable
                size = os.fstat(fd).st_size if fd is not None else os.lstat(path).st_size
                found = self.files[ino] = Durable(size)
            return found

        def refuse_after_cut(self) -> None:
            if self.cut:
                raise FuseOSError(errno.EIO)

        def forget_if_gone(self, path: str) -> None:
            """An unlink or a rename over `path` removes the file's last name."""
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            if stat.S_ISREG(st.st_mode) and st.st_nlink <= 1:
                self.files.pop(st.st_ino, None)

        # --- power -----------------------------------------------------------
        def power_cut(self) -> dict:
            """Refuses every later change and rolls each file back to its durable content."""
            with self.mutex:
                self.cut = True
                started = time.monotonic()
                files = []
                for folder, _dirs, names in os.walk(self.root):
                    for name in sorted(names):
                        path = os.path.join(folder, name)
                        try:
                            st = os.lstat(path)
                        except FileNotFoundError:
                            continue
                        durable = self.files.get(st.st_ino)
                        if durable is None or not stat.S_ISREG(st.st_mode):
                            continue
                        before, cut_off, rewound = rollback(path, durable)
                        if cut_off or rewound:
                            files.append(
                                {
                                    "file": os.path.relpath(path, self.root),
                                    "size": before,
                                    "kept": durable.size,
                                    "lost_bytes": cut_off + rewound,
                                    "truncated_bytes": cut_off,
                                    "rewound_bytes": rewound,
                                }
                            )
                self.files.clear()
                return {
                    "files": sorted(files, key=lambda f: f["file"]),
                    "lost_bytes": sum(f["lost_bytes"] for f in files),
                    "seconds": round(time.monotonic() - started, 3),
                }

        # --- files -----------------------------------------------------------
        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(self.real(path))
            return stat_dict(st)

        def open(self, path, flags):
            real = self.real(path)
            with self.mutex:
                if flags & os.O_TRUNC:
                    self.refuse_after_cut()
                    self.truncate(path, 0)
                fd = os.open(real, flags & ~OPEN_FLAGS_DROPPED & ~os.O_TRUNC)
                self.inodes[fd] = os.fstat(fd).st_ino
                return fd

        def create(self, path, mode, flags=os.O_WRONLY):
            with self.mutex:
                self.refuse_after_cut()
                fd = os.open(self.real(path), (flags & ~os.O_APPEND) | os.O_CREAT, mode)
                ino = os.fstat(fd).st_ino
                self.inodes[fd] = ino
                self.files[ino] = Durable(0)  # a new name survives; its content does not until fsync
                return fd

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            with self.mutex:
                self.refuse_after_cut()
                ino = self.inodes.get(fh) or os.fstat(fh).st_ino
                self.durable(ino, fd=fh).save_before_change(fh, offset, offset + len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            with self.mutex:
                self.refuse_after_cut()
                real = self.real(path)
                st = os.lstat(real)
                durable = self.durable(st.st_ino, path=real)
                if length < durable.size:
                    fd = os.open(real, os.O_RDONLY)
                    try:
                        durable.save_before_change(fd, length, durable.size)
                    finally:
                        os.close(fd)
                os.truncate(real, length)

        def fallocate(self, path, mode, offset, size, fh):
            with self.mutex:
                self.refuse_after_cut()
                ino = self.inodes.get(fh) or os.fstat(fh).st_ino
                self.durable(ino, fd=fh)
                os.posix_fallocate(fh, offset, size)
                return 0

        def fsync(self, path, datasync, fh):
            with self.mutex:
                if not self.cut:  # after the cut nothing reaches the disk any more
                    ino = self.inodes.get(fh) or os.fstat(fh).st_ino
                    self.files.pop(ino, None)
                return 0

        def fsyncdir(self, path, datasync, fh):
            return 0

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            with self.mutex:
                self.inodes.pop(fh, None)
            os.close(fh)
            return 0

        # --- names -----------------------------------------------------------
        def unlink(self, path):
            with self.mutex:
                self.refuse_after_cut()
                real = self.real(path)
                self.forget_if_gone(real)
                os.unlink(real)

        def rename(self, old, new):
            with self.mutex:
                self.refuse_after_cut()
                self.forget_if_gone(self.real(new))
                os.rename(self.real(old), self.real(new))

        def link(self, target, source):
            with self.mutex:
                self.refuse_after_cut()
                os.link(self.real(source), self.real(target))

        def symlink(self, target, source):
            with self.mutex:
                self.refuse_after_cut()
                os.symlink(source, self.real(target))

        def readlink(self, path):
            return os.readlink(self.real(path))

        def mkdir(self, path, mode):
            with self.mutex:
                self.refuse_after_cut()
                os.mkdir(self.real(path), mode)

        def rmdir(self, path):
            with self.mutex:
                self.refuse_after_cut()
                os.rmdir(self.real(path))

        def readdir(self, path, fh):
            return [".", ".."] + os.listdir(self.real(path))

        def chmod(self, path, mode):
            os.chmod(self.real(path), mode)

        def chown(self, path, uid, gid):
            os.chown(self.real(path), uid, gid)

        def utimens(self, path, times=None):
            os.utime(self.real(path), ns=times)

        def access(self, path, amode):
            if not os.access(self.real(path), amode):
                raise FuseOSError(errno.EACCES)

        def statfs(self, path):
            st = os.statvfs(self.real(path))
            return {
                k: getattr(st, k)
                for k in (
                    "f_bavail",
                    "f_bfree",
                    "f_blocks",
                    "f_bsize",
                    "f_favail",
                    "f_ffree",
                    "f_files",
                    "f_flag",
                    "f_frsize",
                    "f_namemax",
                )
            }

    return PowerFS()


# --- the daemon and its control socket -------------------------------------------


def serve_control(fs, control: str) -> None:
    """Answers `cut` (and `status`) on a Unix socket, one JSON line per request."""
    if os.path.exists(control):
        os.unlink(control)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(control)
    server.listen(4)

    def loop() -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                request = conn.makefile("r").readline().strip()
                if request == "cut":
                    answer = fs.power_cut()
                elif request == "status":
                    with fs.mutex:
                        answer = {"cut": fs.cut, "files_with_unsynced_data": len(fs.files)}
                else:
                    answer = {"error": f"unknown request {request!r}"}
                conn.sendall((json.dumps(answer) + "\n").encode())

    threading.Thread(target=loop, name="powerfs-control", daemon=True).start()


def mounted(mount: str) -> bool:
    """Whether `mount` is served by a powerfs right now (this process's mount table)."""
    mount = os.path.realpath(mount)
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            if fields[4] == mount and fields[dash + 2] == FSNAME:
                return True
    return False


def serve(mount: str, backing: str, control: str) -> int:
    from mfusepy import FUSE

    if mounted(mount):
        print(f"powerfs: {mount} is already served", file=sys.stderr)
        return 2
    if not os.path.isdir(backing):
        # first mount: what the system wrote so far (its formatted storage) becomes the disk
        os.makedirs(os.path.dirname(backing) or ".", exist_ok=True)
        if os.path.isdir(mount):
            os.rename(mount, backing)
        else:
            os.makedirs(backing)
    os.makedirs(mount, exist_ok=True)
    if os.listdir(mount):
        print(f"powerfs: {mount} is not empty; refusing to hide its files", file=sys.stderr)
        return 2
    fs = make_filesystem(backing)
    serve_control(fs, control)
    print(f"powerfs: serving {backing} at {mount}", flush=True)
    FUSE(fs, mount, foreground=True, fsname=FSNAME, subtype=FSNAME)
    print("powerfs: unmounted", flush=True)
    return 0


def wait(mount: str, timeout: float) -> int:
    end = time.monotonic() + timeout
    while True:
        if mounted(mount):
            print(f"powerfs: {mount} is served")
            return 0
        if time.monotonic() >= end:
            break
        time.sleep(0.05)
    print(f"powerfs: {mount} not served after {timeout:g} s", file=sys.stderr)
    return 1


def cut(mount: str, control: str) -> int:
    """The power cut: rollback inside the daemon, then the mount goes away."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(120)
        conn.connect(control)
        conn.sendall(b"cut\n")
        report = json.loads(conn.makefile("r").readline())
    unmount(mount)
    print(json.dumps(report), flush=True)
    return 0


def unmount(mount: str, timeout: float = 10.0) -> None:
    """Unmounts (lazily if something still holds it) and waits until it is gone."""
    if subprocess.run(["umount", mount], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", mount], capture_output=True)
    end = time.monotonic() + timeout
    while mounted(mount) and time.monotonic() < end:
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="powerfs.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["serve", "wait", "cut"])
    parser.add_argument("--mount", required=True)
    parser.add_argument("--backing")
    parser.add_argument("--control")
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args.mount, args.backing, args.control)
    if args.command == "wait":
        return wait(args.mount, args.timeout)
    return cut(args.mount, args.control)


if __name__ == "__main__":
    sys.exit(main())
