"""`gregor lab up|status|down`, `gregor kafka|kfake|tansu|java install`, `gregor demo`."""

from __future__ import annotations

import json

from ground.errors import GregorError
from ground.options import add_options
from ground.signals import sigterm_as_interrupt
from harness.controller.lab_options import (
    add_client_config_argument,
    add_lab_arguments,
    add_system_arguments,
    backend_options,
    client_config,
    system_options,
)
from harness.controller.run_config import CLIENT_OPTIONS
from harness.systems.kafka import config as kafka_config
from harness.systems.kafka import install as kafka_install


def register(subparsers) -> None:
    lab = subparsers.add_parser("lab", help="a cluster of nodes (namespaces or containers) running one system")
    lab_sub = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    up = lab_sub.add_parser("up", help="start a lab and wait until it is healthy")
    add_lab_arguments(up)
    add_system_arguments(up)
    up.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    up.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker setting for every node (repeatable; wins over defaults)",
    )
    up.add_argument(
        "--broker-config-file",
        action="append",
        default=[],
        metavar="FILE",
        help="properties file of broker settings (repeatable)",
    )
    up.add_argument("--timeout", type=float, default=120, help="seconds to wait for health (default 120)")
    up.add_argument(
        "--data-on",
        default="disk",
        choices=["disk", "powerfs"],
        help="powerfs: serve each node's data from a FUSE file system that a power-loss "
        "fault can roll back to its last fsync (local backend; default disk)",
    )
    up.set_defaults(func=cmd_lab_up)

    status = lab_sub.add_parser("status", help="nodes, processes, controller and partition leaders")
    add_lab_arguments(status, system=False)
    add_client_config_argument(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=cmd_lab_status)

    down = lab_sub.add_parser("down", help="remove the lab (idempotent, also after a crash)")
    add_lab_arguments(down, system=False)
    down.set_defaults(func=cmd_lab_down)

    for system, (what, action, default, listing) in INSTALLERS.items():
        parser = subparsers.add_parser(system, help=what)
        actions = parser.add_subparsers(dest=f"{system}_command", metavar="ACTION", required=True)
        install = actions.add_parser("install", help=action)
        install.add_argument(
            "--version",
            default=default,
            metavar="V",
            help=f"the version (default {default or DEFAULT_NAMES.get(system, kafka_install.DEFAULT_VERSION)})",
        )
        install.add_argument("--list", action="store_true", help=listing)
        install.set_defaults(func=cmd_install, system=system)

    demo = subparsers.add_parser(
        "demo", help="the main job: a 3-node lab under faults, checked and reported, then torn down"
    )
    add_lab_arguments(demo)
    demo.add_argument("--time-limit", type=int, default=60, help="seconds of faults and load (default 60)")
    demo.add_argument("--store", default="store", help="store directory (default ./store)")
    demo.add_argument("--keep-lab", action="store_true", help="leave the lab up afterwards")
    add_options(demo, CLIENT_OPTIONS)
    demo.set_defaults(func=cmd_demo)


def _say(message: str) -> None:
    print(message, flush=True)


def cmd_lab_up(args) -> int:
    from harness.lab import Lab

    overrides = kafka_config.parse_overrides(args.broker_config, args.broker_config_file)
    with sigterm_as_interrupt():
        lab = Lab.up(
            nodes=args.nodes,
            version=args.version,
            broker_overrides=overrides,
            name=args.lab,
            progress=_say,
            timeout=args.timeout,
            backend=args.backend,
            system=args.system,
            system_options=system_options(args),
            client_config=client_config(args),
            backend_options=backend_options(args),
            storage=args.data_on,
        )
    for node in lab.nodes:
        _say(f"  {node.name}  {node.address}  pid {node.pid()}  log {node.service.log}")
    _say(f"bootstrap servers: {lab.bootstrap_servers}")
    _say(
        f"lab up took {lab.up_seconds:.1f} s (command to: every partition of a test topic has a leader "
        f"and {lab.system.replication(len(lab.nodes))} in-sync replicas)"
    )
    return 0


def cmd_lab_status(args) -> int:
    """A stale lab (its machines gone) is shown as such, exit status 1, with nothing sent to it."""
    from harness.lab import Lab, down_command

    lab = Lab.attach(args.lab, backend=args.backend, client_config=client_config(args), alive=False)
    why = lab.stale()
    if why:
        remedy = down_command(lab.name, lab.backend.name)
        if args.json:
            print(json.dumps({"name": lab.name, "backend": lab.backend.name, "stale": why, "run": remedy}, indent=2))
        else:
            print(f"lab {lab.name}  {lab.system.name} {lab.version} on {lab.backend.name}  STALE: {why}")
            print(f"  not reused, nothing was sent to its brokers; run: {remedy}")
        return 1
    status = lab.status()
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(
        f"lab {status['name']}  {status['system']} {status['version']} on {status['backend']}  "
        f"bootstrap {status['bootstrap_servers']}"
    )
    controller = status["controller"]
    for node in status["nodes"]:
        role = "  active controller" if node["name"] == controller else ""
        print(f"  {node['name']}  {node['address']:<15} {node['state']:<8} pid {node['pid'] or '-'}{role}")
    for name, address in sorted(status["clients"].items()):
        print(f"  client {name}  {address}")
    print(f"active controller: {controller if controller is not None else 'unknown'}")
    for topic, partitions in status["leaders"].items():
        for pid, part in partitions.items():
            print(
                f"  {topic}/{pid}: leader {part['leader_node'] or part['leader']}  "
                f"replicas {part['replicas']}  isr {part['isr']}"
            )
    for error in status["errors"]:
        print(f"  (could not ask the cluster: {error})")
    return 0


def cmd_lab_down(args) -> int:
    """Also ends what a crashed `gregor run` left: its client processes
    (paused ones resumed first, so none stays stopped) and the fault ledger."""
    from harness.lab import Lab, lab_name
    from nemesis.heal import release_clients
    from workloads.client_registry import kill_leftover_clients

    name = lab_name(args.lab, args.backend)
    release_clients(name)
    kill_leftover_clients(name, progress=_say)
    Lab.down(name, progress=_say, backend=args.backend, backend_options=backend_options(args))
    return 0


# what an installer's default version is, where it is not a version of ours
DEFAULT_NAMES = {"java": "the newest on Maven Central"}

# system -> (what it is, what install does, default --version, what --list lists)
INSTALLERS = {
    "kafka": (
        "Apache Kafka jars from Maven Central",
        "fetch a Kafka version (cached per version)",
        None,
        "list the versions Maven Central has (3.8.0 on) and exit",
    ),
    "kfake": (
        "franz-go's kfake, built with the Go toolchain",
        "build Gregor's kfake server (cached per version)",
        "latest",
        "list the newest kfake versions on the Go module proxy and exit",
    ),
    "tansu": (
        "Tansu, built from crates.io with cargo",
        "build Tansu (about 11 minutes on 2 cores, once per version)",
        None,
        "list the versions crates.io has and exit",
    ),
    "java": (
        "Kafka's Java client (kafka-clients from Maven Central) for `gregor run --client java`",
        "fetch a kafka-clients version and compile Gregor's driver against it (cached per version)",
        None,
        "list the kafka-clients versions Maven Central has (3.8.0 on) and exit",
    ),
}


def _installer(system: str):
    """(versions to list, default, installed(version), install(version)) of one system."""
    if system == "kafka":
        return (
            kafka_install.maven_versions,
            kafka_install.DEFAULT_VERSION,
            kafka_install.installed,
            lambda v: kafka_install.install(v, progress=_say),
        )
    if system == "kfake":
        from harness.systems.kfake import build

        return (
            lambda: list(reversed(build.proxy_versions(build.MODULE)[-8:])),
            None,
            build.installed,
            lambda v: build.build(v, progress=_say),
        )
    if system == "java":
        from workloads.java_client import build as java_build

        return (
            lambda: list(reversed(java_build.maven_versions())),
            None,
            java_build.installed,
            lambda v: java_build.install(v, progress=_say),
        )
    from harness.systems.tansu import install

    return (
        lambda: list(reversed(install.crate_versions())),
        install.DEFAULT_VERSION,
        install.installed,
        lambda v: install.install(v, progress=_say),
    )


def cmd_install(args) -> int:
    versions, default, installed, install = _installer(args.system)
    if args.list:
        for version in versions():
            mark = " (default)" if version == default else ""
            print(f"{version}{mark}{' installed' if installed(version) else ''}")
        return 0
    install(args.version)
    return 0


def cmd_demo(args) -> int:
    from harness.controller.demo import run_demo

    if args.time_limit < 5:
        raise GregorError(f"--time-limit must be at least 5 seconds, got {args.time_limit}")
    with sigterm_as_interrupt():
        return run_demo(
            name=args.lab,
            version=args.version,
            time_limit=args.time_limit,
            store=args.store,
            keep_lab=args.keep_lab,
            progress=_say,
            backend=args.backend,
            system=args.system,
            backend_options=backend_options(args),
            client=args.client,
            client_version=args.client_version,
        )
