"""One entry point for the relay and its control client, so the package runs as one file on a node
(harness/wire_nodes.py ships it as a zipapp): `python3 gregor-wire.pyz relay serve ...`,
`python3 gregor-wire.pyz control --tag T status`; here also `python3 -m harness.wire relay ...`."""

from __future__ import annotations

import sys

COMMANDS = ("relay", "control")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: gregor-wire {{{','.join(COMMANDS)}}} ARGS... (each has its own --help)", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    if argv[0] == "relay":
        from .relay import main as command
    else:
        from .control import main as command
    return command(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
