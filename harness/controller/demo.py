"""The main job: a real 3-node cluster under faults, checked, reported.

`gregor demo` is `gregor run` with settings that show what Gregor does in
about two minutes: idempotent acks=all producers and assigned consumers on a
3-node lab while partitions, pauses and broker kills hit it, then the final
drain, the PySpark check, the HTML report, and the lab torn down again.
"""

from __future__ import annotations

import argparse
from typing import Callable

from harness.controller.lab_options import backend_flags
from harness.lab import Lab, lab_name
from workloads.kafka_client import LIBRDKAFKA

DEMO_RUN = [
    "--workload",
    "queue",
    "--concurrency",
    "6",
    "--rate",
    "300",
    "--batch",
    "10",
    "--keys",
    "6",
    "--partitions-per-topic",
    "3",
    "--nemesis",
    "partition,pause,kill",
    "--nemesis-interval",
    "8",
    "--seed",
    "1",
    # roles a queue run has (no coordinators, no client namespaces), so no fault slot is skipped
    "--nemesis-targets",
    "leader,controller,one,minority,majority",
    "--name",
    "demo-queue-faults",
]


def demo_arguments(
    time_limit: int,
    lab: str,
    version: str | None,
    store: str,
    backend: str = "local",
    system: str = "kafka",
    backend_options: dict | None = None,
    client: str = LIBRDKAFKA,
    client_version: str | None = None,
) -> list[str]:
    """The `gregor run` arguments of the demo (also shown to the user)."""
    argv = [
        *DEMO_RUN,
        "--time-limit",
        str(time_limit),
        "--lab",
        lab,
        "--store",
        store,
        "--backend",
        backend,
        "--system",
        system,
        *backend_flags(backend_options or {}),
    ]
    if version:
        argv += ["--version", version]
    if client != LIBRDKAFKA or client_version:
        argv += ["--client", client] + (["--client-version", client_version] if client_version else [])
    return argv


def run_demo(
    name: str | None = None,
    version: str | None = None,
    time_limit: int = 60,
    store: str = "store",
    keep_lab: bool = False,
    progress: Callable[[str], None] = print,
    backend: str = "local",
    system: str = "kafka",
    backend_options: dict | None = None,
    client: str = LIBRDKAFKA,
    client_version: str | None = None,
) -> int:
    from harness.controller import run_cli

    lab = lab_name(name, backend)
    argv = demo_arguments(time_limit, lab, version, store, backend, system, backend_options, client, client_version)
    parser = argparse.ArgumentParser(prog="gregor run")
    run_cli.add_arguments(parser)
    args = parser.parse_args(argv)
    progress("demo: gregor run " + " ".join(argv))
    try:
        code = run_cli.main(args)
    finally:
        if not keep_lab:
            progress("demo: tearing the lab down")
            Lab.down(lab, progress=progress, backend=backend, backend_options=backend_options)
    progress(f"demo: the report is {store}/latest/report.html (all runs: {store}/index.html)")
    return code
