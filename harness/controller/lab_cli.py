"""`gregor lab up|status|down`, `gregor kafka install`, `gregor demo`."""

from __future__ import annotations

import json

from harness.controller.lab_options import add_lab_arguments
from harness.errors import GregorError
from harness.signals import sigterm_as_interrupt
from harness.systems.kafka import config as kafka_config
from harness.systems.kafka import install as kafka_install


def register(subparsers) -> None:
    lab = subparsers.add_parser("lab", help="a cluster of nodes (namespaces or containers) running one system")
    lab_sub = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    up = lab_sub.add_parser("up", help="start a lab and wait until it is healthy")
    add_lab_arguments(up)
    up.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    up.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting for every node (repeatable; wins over defaults)")
    up.add_argument("--broker-config-file", action="append", default=[], metavar="FILE",
                    help="properties file of broker settings (repeatable)")
    up.add_argument("--timeout", type=float, default=120, help="seconds to wait for health (default 120)")
    up.add_argument("--storage", default="disk", choices=["disk", "powerfs"],
                    help="powerfs: serve each node's data from a FUSE file system that a power-loss "
                         "fault can roll back to its last fsync (local backend; default disk)")
    up.set_defaults(func=cmd_lab_up)

    status = lab_sub.add_parser("status", help="nodes, processes, controller and partition leaders")
    add_lab_arguments(status, system=False)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=cmd_lab_status)

    down = lab_sub.add_parser("down", help="remove the lab (idempotent, also after a crash)")
    add_lab_arguments(down, system=False)
    down.set_defaults(func=cmd_lab_down)

    kafka = subparsers.add_parser("kafka", help="Apache Kafka jars from Maven Central")
    kafka_sub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    install = kafka_sub.add_parser("install", help="fetch a Kafka version (cached per version)")
    install.add_argument("--version", default=None, metavar="V",
                         help=f"Apache Kafka version (default {kafka_install.DEFAULT_VERSION})")
    install.add_argument("--list", action="store_true", help="list known versions and exit")
    install.set_defaults(func=cmd_kafka_install)

    demo = subparsers.add_parser(
        "demo", help="the main job: a 3-node lab under faults, checked and reported, then torn down")
    add_lab_arguments(demo)
    demo.add_argument("--time-limit", type=int, default=60, help="seconds of faults and load (default 60)")
    demo.add_argument("--store", default="store", help="store directory (default ./store)")
    demo.add_argument("--keep-lab", action="store_true", help="leave the lab up afterwards")
    demo.set_defaults(func=cmd_demo)


def _say(message: str) -> None:
    print(message, flush=True)


def cmd_lab_up(args) -> int:
    from harness.lab import Lab
    overrides = kafka_config.parse_overrides(args.broker_config, args.broker_config_file)
    with sigterm_as_interrupt():
        lab = Lab.up(nodes=args.nodes, version=args.version, broker_overrides=overrides, name=args.lab,
                     progress=_say, timeout=args.timeout, backend=args.backend, system=args.system,
                     storage=args.storage)
    for node in lab.nodes:
        _say(f"  {node.name}  {node.address}  pid {node.pid()}  log {node.service.log}")
    _say(f"bootstrap servers: {lab.bootstrap_servers}")
    _say(f"lab up took {lab.up_seconds:.1f} s (command to: every partition of a test topic has a leader "
         f"and {lab.system.replication(len(lab.nodes))} in-sync replicas)")
    return 0


def cmd_lab_status(args) -> int:
    from harness.lab import Lab
    lab = Lab.attach(args.lab, backend=args.backend)
    status = lab.status()
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(f"lab {status['name']}  {status['system']} {status['version']} on {status['backend']}  "
          f"bootstrap {status['bootstrap_servers']}")
    controller = status["controller"]
    for node in status["nodes"]:
        role = "  active controller" if node["name"] == controller else ""
        print(f"  {node['name']}  {node['address']:<15} {node['state']:<8} pid {node['pid'] or '-'}{role}")
    for name, address in sorted(status["clients"].items()):
        print(f"  client {name}  {address}")
    print(f"active controller: {controller if controller is not None else 'unknown'}")
    for topic, partitions in status["leaders"].items():
        for pid, part in partitions.items():
            print(f"  {topic}/{pid}: leader {part['leader_node'] or part['leader']}  "
                  f"replicas {part['replicas']}  isr {part['isr']}")
    for error in status["errors"]:
        print(f"  (could not ask the cluster: {error})")
    return 0


def cmd_lab_down(args) -> int:
    """Also ends what a crashed `gregor run` left: its client processes
    (paused ones resumed first, so none stays stopped) and the fault ledger."""
    from harness.lab import Lab, lab_name
    from nemesis.heal import release_clients
    from workloads.clients import kill_leftover_clients
    name = lab_name(args.lab, args.backend)
    release_clients(name)
    kill_leftover_clients(name, progress=_say)
    Lab.down(name, progress=_say, backend=args.backend)
    return 0


def cmd_kafka_install(args) -> int:
    if args.list:
        for version in kafka_install.KNOWN_VERSIONS:
            mark = " (default)" if version == kafka_install.DEFAULT_VERSION else ""
            cached = " installed" if kafka_install.installed(version) else ""
            print(f"{version}{mark}{cached}")
        return 0
    kafka_install.install(args.version, progress=_say)
    return 0


def cmd_demo(args) -> int:
    from harness.controller.demo import run_demo
    if args.time_limit < 5:
        raise GregorError(f"--time-limit must be at least 5 seconds, got {args.time_limit}")
    with sigterm_as_interrupt():
        return run_demo(name=args.lab, version=args.version, time_limit=args.time_limit, store=args.store,
                        keep_lab=args.keep_lab, progress=_say, backend=args.backend, system=args.system)
