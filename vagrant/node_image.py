"""Prints the tag of Gregor's node image, building it first if needed.

The Vagrantfile's docker provider runs this: its nodes are containers of the
same image as the Docker backend's (Debian with a JRE, Python, iptables,
iproute2 and OpenSSH's server), built here with debootstrap, never pulled.

    .venv/bin/python vagrant/node_image.py     # -> gregor-node:<hash of the recipe>
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ground.errors import GregorError  # noqa: E402
from harness.backends import docker_engine, docker_image  # noqa: E402


def main() -> int:
    try:
        say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731 - stdout is the tag
        print(docker_image.ensure_image(docker_engine.client(progress=say), say))
    except GregorError as error:
        print(f"gregor: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
