"""Files to and from SSH hosts over SFTP, and the checksummed cache on each host.

A node never downloads anything itself: what a system needs (Kafka's jars
from our Maven cache) is uploaded from the controller once, into
<login home>/.cache/gregor/files/<sha256 of the tree>/, checked there with
sha256sum against a manifest before it is renamed into place, and found
again by that name by every later lab (a changed file is a new tree, a new
name). An interrupted upload leaves only a `.partial-*` directory, which
the next upload of that tree removes.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shlex
import stat
import uuid
from pathlib import Path

from ground.errors import GregorError

MANIFEST = ".gregor-manifest"
CACHE = ".cache/gregor/files"  # under the login user's home on the host

_digests: dict[tuple, tuple[str, str]] = {}  # (path, listing) -> (digest, manifest), per process


def tree_manifest(local_dir: str) -> tuple[str, str]:
    """(sha256 of the tree, sha256sum-style manifest of its files), computed
    once per process for an unchanged tree (sizes and mtimes)."""
    root = Path(local_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    listing = tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    key = (str(root.resolve()), listing)
    if key not in _digests:
        lines = []
        for path in files:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            lines.append(f"{digest.hexdigest()}  ./{path.relative_to(root).as_posix()}\n")
        manifest = "".join(lines)
        _digests[key] = (hashlib.sha256(manifest.encode()).hexdigest(), manifest)
    return _digests[key]


def put_tree(sftp, local: str, remote: str) -> None:
    """A file, or a directory with everything under it (executable bits kept)."""
    _mkdirs(sftp, remote if os.path.isdir(local) else posixpath.dirname(remote))
    _put(sftp, local, remote)


def _put(sftp, local: str, remote: str) -> None:
    if os.path.isdir(local):
        try:
            sftp.mkdir(remote)
        except OSError:
            pass  # there already (the top of the tree, or an upload done again)
        for entry in sorted(os.listdir(local)):
            _put(sftp, os.path.join(local, entry), posixpath.join(remote, entry))
        return
    sftp.put(local, remote, confirm=False)
    mode = os.stat(local).st_mode & 0o777
    if mode & 0o111:
        sftp.chmod(remote, mode)


def get_tree(sftp, remote: str, local: str, skip: frozenset[str] = frozenset()) -> None:
    """A file, or a directory with everything under it but the names in `skip`."""
    mode = sftp.stat(remote).st_mode
    if stat.S_ISDIR(mode):
        os.makedirs(local, exist_ok=True)
        for entry in sftp.listdir_attr(remote):
            if entry.filename in skip:
                continue
            get_tree(sftp, posixpath.join(remote, entry.filename), os.path.join(local, entry.filename))
    elif stat.S_ISREG(mode):
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        sftp.get(remote, local)


def _mkdirs(sftp, path: str) -> None:
    if not path or path in ("/", "."):
        return
    try:
        if stat.S_ISDIR(sftp.stat(path).st_mode):
            return
    except FileNotFoundError:
        pass
    _mkdirs(sftp, posixpath.dirname(path))
    try:
        sftp.mkdir(path)
    except OSError:
        if not stat.S_ISDIR(sftp.stat(path).st_mode):
            raise


def provide(connection, local_dir: str, progress=None) -> str:
    """Where `local_dir` is on the host: its cached copy, uploaded and
    checked first if that host does not have this exact tree yet."""
    digest, manifest = tree_manifest(local_dir)

    def find_or_upload(sftp) -> str:
        home = sftp.normalize(".")
        target = posixpath.join(home, CACHE, digest)
        try:
            sftp.stat(posixpath.join(target, MANIFEST))
            return target
        except FileNotFoundError:
            pass
        if progress:
            progress(f"{connection.label}: uploading {local_dir} (sha256 {digest[:12]}) into its cache")
        stage = f"{target}.partial-{uuid.uuid4().hex[:8]}"
        put_tree(sftp, local_dir, stage)
        with sftp.open(posixpath.join(stage, MANIFEST), "w") as handle:
            handle.write(manifest)
        return _commit(connection, stage, target)

    return connection.with_sftp(find_or_upload)


def _commit(connection, stage: str, target: str) -> str:
    """Checks every file against the manifest on the host, then renames the
    stage into place (or drops it when another upload got there first), and
    removes what interrupted uploads of this tree left more than 10 min ago."""
    script = (
        'cd "$1" && sha256sum --quiet --strict -c .gregor-manifest || exit 3; cd /; '
        'if [ -e "$2/.gregor-manifest" ]; then rm -rf "$1"; else rm -rf "$2" && mv "$1" "$2"; fi && '
        'find "$(dirname "$2")" -maxdepth 1 -name "$(basename "$2").partial-*" -mmin +10 '
        "-exec rm -rf {} + 2>/dev/null; exit 0"
    )
    code, out, err = connection.run(shlex.join(["sh", "-c", script, "sh", stage, target]), timeout=300)
    if code == 3:
        connection.run(shlex.join(["rm", "-rf", stage]))
        raise GregorError(
            f"{connection.label}: uploaded files do not match their sha256 sums "
            f"({(out or err).decode(errors='replace').strip()[:200]})"
        )
    if code != 0:
        raise GregorError(
            f"{connection.label}: could not put the cached files in place: {err.decode(errors='replace').strip()[:200]}"
        )
    return target
