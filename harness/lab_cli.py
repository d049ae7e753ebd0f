"""`gregor lab up|status|down`, `gregor kafka install`, `gregor demo`."""

from __future__ import annotations

import json
import signal

from harness import kafka_config, kafka_install
from harness.errors import GregorError


def register(subparsers) -> None:
    lab = subparsers.add_parser("lab", help="a local Kafka cluster in network namespaces")
    lab_sub = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    up = lab_sub.add_parser("up", help="start a lab and wait until it is healthy")
    _lab_name_arg(up)
    up.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    _version_arg(up)
    up.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="broker setting for every node (repeatable; wins over defaults)")
    up.add_argument("--broker-config-file", action="append", default=[], metavar="FILE",
                    help="properties file of broker settings (repeatable)")
    up.add_argument("--timeout", type=float, default=120, help="seconds to wait for health (default 120)")
    up.set_defaults(func=cmd_lab_up)

    status = lab_sub.add_parser("status", help="nodes, processes, controller and partition leaders")
    _lab_name_arg(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=cmd_lab_status)

    down = lab_sub.add_parser("down", help="remove the lab (idempotent, also after a crash)")
    _lab_name_arg(down)
    down.set_defaults(func=cmd_lab_down)

    kafka = subparsers.add_parser("kafka", help="Apache Kafka jars from Maven Central")
    kafka_sub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    install = kafka_sub.add_parser("install", help="fetch a Kafka version (cached per version)")
    _version_arg(install)
    install.add_argument("--list", action="store_true", help="list known versions and exit")
    install.set_defaults(func=cmd_kafka_install)

    demo = subparsers.add_parser(
        "demo", help="the main job: a 3-node lab under faults, checked and reported, then torn down")
    _lab_name_arg(demo)
    _version_arg(demo)
    demo.add_argument("--time-limit", type=int, default=60, help="seconds of faults and load (default 60)")
    demo.add_argument("--store", default="store", help="store directory (default ./store)")
    demo.add_argument("--keep-lab", action="store_true", help="leave the lab up afterwards")
    demo.set_defaults(func=cmd_demo)


def _lab_name_arg(parser) -> None:
    parser.add_argument("--lab", default=None, metavar="NAME",
                        help="lab name (default $GREGOR_LAB or 'gregor'); labs with different names coexist")


def _version_arg(parser) -> None:
    parser.add_argument("--version", default=None, metavar="V",
                        help=f"Apache Kafka version (default {kafka_install.DEFAULT_VERSION})")


def _say(message: str) -> None:
    print(message, flush=True)


def _terminate_as_interrupt() -> None:
    """SIGTERM unwinds like Ctrl-C, so the try/finally teardown still runs."""
    def handler(_signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def cmd_lab_up(args) -> int:
    from harness.lab import Lab
    _terminate_as_interrupt()
    overrides = kafka_config.parse_overrides(args.broker_config, args.broker_config_file)
    lab = Lab.up(nodes=args.nodes, version=args.version, broker_overrides=overrides,
                 name=args.lab, progress=_say, timeout=args.timeout)
    for node in lab.nodes:
        _say(f"  {node.name}  {node.ip}  broker {node.broker_id}  pid {node.pid()}  log {node.log_path}")
    _say(f"bootstrap servers: {lab.bootstrap_servers}")
    _say(f"lab up took {lab.up_seconds:.1f} s (command to: every partition of a test topic "
         f"has a leader and {min(3, len(lab.nodes))} in-sync replicas)")
    return 0


def cmd_lab_status(args) -> int:
    from harness.lab import Lab
    lab = Lab.attach(args.lab)
    status = lab.status()
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(f"lab {status['name']}  Kafka {status['version']}  bootstrap {status['bootstrap_servers']}")
    controller = status["controller"]
    for node in status["nodes"]:
        role = "  active controller" if node["broker_id"] == controller else ""
        print(f"  {node['name']}  {node['ip']:<15} broker {node['broker_id']}  "
              f"{node['state']:<8} pid {node['pid'] or '-'}{role}")
    for name, ip in sorted(status["clients"].items()):
        print(f"  client {name}  {ip}")
    print(f"active controller: {controller if controller is not None else 'unknown'}")
    for topic, partitions in status["leaders"].items():
        for pid, part in partitions.items():
            print(f"  {topic}/{pid}: leader {part['leader']}  replicas {part['replicas']}  isr {part['isr']}")
    for error in status["errors"]:
        print(f"  (could not ask the cluster: {error})")
    return 0


def cmd_lab_down(args) -> int:
    """Also ends what a crashed `gregor run` left: its client processes
    (paused ones resumed first, so none stays stopped) and the fault ledger."""
    from harness.lab import Lab, lab_name
    from nemesis.heal import release_clients
    from workloads.clients import kill_leftover_clients
    name = lab_name(args.lab)
    release_clients(name)
    kill_leftover_clients(name, progress=_say)
    Lab.down(name, progress=_say)
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
    from harness.demo import run_demo
    _terminate_as_interrupt()
    if args.time_limit < 5:
        raise GregorError(f"--time-limit must be at least 5 seconds, got {args.time_limit}")
    return run_demo(name=args.lab, version=args.version, time_limit=args.time_limit,
                    store=args.store, keep_lab=args.keep_lab, progress=_say)
