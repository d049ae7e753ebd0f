"""The node image of the Docker backend, built here: nothing is ever pulled.

No registry is reachable from many test networks (nor from this project's
machines), so the image is a Debian root file system made by debootstrap
from Debian's own package mirror (the one apt already uses), imported with
`docker import`. It holds what a node needs: a JRE for JVM systems, Python
for our node-side tools (the netem emulator), iptables, iproute2 (tc), procps
and OpenSSH's server (the SSH backend and the Vagrant lab drive nodes over
SSH). The tag is a hash of this recipe, so the image is built once and
rebuilt only when the recipe changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from ground.errors import GregorError

SUITE = "bookworm"
PACKAGES = (
    "openjdk-17-jre-headless",
    "python3",
    "iptables",
    "iproute2",
    "procps",
    "openssh-server",
    "ca-certificates-java",
    "netbase",
    "less",
)
REPOSITORY = "gregor-node"
RECIPE_VERSION = "1"  # bump when the steps below change in a way the package list does not show
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# Run inside the new root file system before it is imported.
_FINISH = r"""
set -e
rm -f /etc/ssh/ssh_host_*_key*          # each container makes its own host keys
mkdir -p /run/sshd /gregor
update-alternatives --set iptables /usr/sbin/iptables-nft >/dev/null 2>&1 || true
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/*
"""


def recipe() -> str:
    return "\n".join([RECIPE_VERSION, SUITE, *PACKAGES, _FINISH])


def image_tag() -> str:
    return f"{REPOSITORY}:{hashlib.sha256(recipe().encode()).hexdigest()[:12]}"


def apt_mirror() -> str:
    """The Debian mirror this host's apt uses (so a proxy or local mirror keeps working)."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        found = re.search(r"^URIs:\s*(\S+/debian)/?\s*$", text, re.M) or re.search(
            r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s+\S+", text, re.M
        )
        if found:
            return found.group(1)
    return DEFAULT_MIRROR


def ensure_image(client, progress: Callable[[str], None]) -> str:
    """The node image's tag, built first if this recipe has no image yet."""
    tag = image_tag()
    if client.images.list(name=tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise GregorError(
            "debootstrap not found; it builds the Docker node image: apt-get install debootstrap (./setup installs it)"
        )
    mirror = apt_mirror()
    progress(f"docker: building the node image {tag} with debootstrap from {mirror} (once; a few minutes)")
    work = Path(tempfile.mkdtemp(prefix="gregor-image-", dir=os.environ.get("TMPDIR", "/var/tmp")))
    try:
        root = work / "root"
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), mirror],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            log = root / "debootstrap" / "debootstrap.log"
            detail = log.read_text(errors="replace") if log.exists() else result.stderr + result.stdout
            last = [line for line in detail.strip().splitlines() if line.strip()][-1:] or ["no output"]
            raise GregorError(f"debootstrap could not build the node image from {mirror}: {last[0]}")
        subprocess.run(["chroot", str(root), "sh", "-c", _FINISH], check=True, capture_output=True)
        archive = work / "root.tar"
        subprocess.run(
            ["tar", "-C", str(root), "--numeric-owner", "-cf", str(archive), "."], check=True, capture_output=True
        )
        repository, _, version = tag.partition(":")
        with open(archive, "rb") as data:
            client.api.import_image_from_data(
                data,
                repository=repository,
                tag=version,
                changes=['CMD ["sleep", "infinity"]', "WORKDIR /gregor", f"LABEL gregor.recipe={version}"],
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not client.images.list(name=tag):
        raise GregorError(f"docker import did not produce the image {tag}")
    progress(f"docker: node image {tag} ready")
    return tag
