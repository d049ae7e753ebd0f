"""How long `lab up` takes, and what the brokers cost in memory, per backend, side by side.

Runs the backends in turn (A B A B ...) so that a drift of the machine's
speed hits both alike, and prints per run the seconds from the call to
"every partition of a test topic has a leader and a full ISR in every
broker's view", and the brokers' resident memory (read on each node, so a
container's broker is measured inside its container). Then the medians and
their ratio to the first backend (goal: docker within 2x of local).

The ssh backend runs on hosts given with --hosts/--ssh-key/--known-hosts (or
--vagrant DIR), else on throwaway containers of the node image running sshd
(harness/backends/ssh_sandbox.py), removed at the end. Its first lab, not
counted, uploads Kafka's jars into each host's cache; that time is printed too.

    sudo .venv/bin/python benchmarks/bench_lab.py [--backends local,docker,ssh] [--nodes 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.controller.lab_options import add_ssh_arguments, backend_options  # noqa: E402
from harness.lab import Lab  # noqa: E402
from harness.registry import DEFAULT_LAB  # noqa: E402


def rss_mib(node) -> float:
    """The system process's resident memory, read on the node itself."""
    pid = node.pid()
    if pid is None:
        return 0.0
    status = node.exec(["cat", f"/proc/{pid}/status"], check=False).stdout
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_run(backend: str, args) -> tuple[float, float]:
    name = f"{args.lab}{backend[0]}"
    options = args.options.get(backend, {})
    Lab.down(name, progress=lambda _m: None, backend=backend, backend_options=options)
    lab = Lab.up(
        nodes=args.nodes,
        version=args.version,
        name=name,
        backend=backend,
        progress=lambda _m: None,
        backend_options=options,
    )
    try:
        memory = [rss_mib(node) for node in lab.nodes]
        return lab.up_seconds, sum(memory)
    finally:
        Lab.down(name, progress=lambda _m: None, backend=backend, backend_options=options)


def ssh_options(args, directory: str) -> dict:
    """The hosts the command line names, else a sandbox of sshd containers (args.sandbox set)."""
    args.backend = "ssh"
    given = backend_options(args)
    if given.get("hosts") or given.get("vagrant"):
        return given
    from harness.backends import ssh_sandbox

    args.sandbox = f"{args.lab}h"
    return ssh_sandbox.start(args.sandbox, args.nodes, directory, progress=print).options()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--version", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lab", default="labb", help="lab name prefix (default labb: labbl, labbd, labbs)")
    add_ssh_arguments(parser)  # --hosts, --ssh-key, --known-hosts, --vagrant, --insecure-host-keys
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for backend in backends:
        if backend not in DEFAULT_LAB:
            parser.error(f"unknown backend {backend!r}")
    args.sandbox = None
    with tempfile.TemporaryDirectory(prefix="bench-ssh-") as directory:
        args.options = {"ssh": ssh_options(args, directory)} if "ssh" in backends else {}
        try:
            return measure(backends, args)
        finally:
            if args.sandbox:
                from harness.backends import ssh_sandbox

                ssh_sandbox.stop(args.sandbox)


def measure(backends: list[str], args) -> int:
    for backend in backends:  # a first lab of each, not counted: image build, JIT caches, page cache, uploads
        seconds, _ = one_run(backend, args)
        print(f"first   {backend:<7} lab up ({args.nodes} nodes) {seconds:5.1f} s (not counted)", flush=True)
    results: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    for run in range(1, args.repeat + 1):
        for backend in backends:
            seconds, memory = one_run(backend, args)
            results[backend].append((seconds, memory))
            print(
                f"run {run} {backend:<7} lab up ({args.nodes} nodes) {seconds:5.1f} s   "
                f"broker RSS {memory:5.0f} MiB total",
                flush=True,
            )
    first = backends[0]
    base_up = statistics.median(s for s, _ in results[first])
    base_mem = statistics.median(m for _, m in results[first])
    for backend in backends:
        up = statistics.median(s for s, _ in results[backend])
        mem = statistics.median(m for _, m in results[backend])
        print(
            f"{backend:<7} lab up median {up:5.1f} s ({up / base_up:.2f}x {first}), "
            f"broker RSS median {mem:5.0f} MiB ({mem / base_mem:.2f}x {first}) over {args.repeat} runs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
