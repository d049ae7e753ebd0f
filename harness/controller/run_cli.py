"""`gregor run`: parse and check every parameter before anything starts."""

from __future__ import annotations

import argparse
import math

from ground.errors import GregorError
from ground.faults import PARTITION, POWER_LOSS, with_composites
from harness import registry
from harness.controller.lab_options import (
    add_lab_arguments,
    add_system_arguments,
    backend_options,
    client_config,
    system_options,
)
from harness.lab import lab_name
from nemesis.options import add_nemesis_arguments

WORKLOADS = ("queue", "txn", "zombie", "eos", "group")
MAX_PARTITIONS = 2000


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a workload against the lab and record its history",
        description="Bring up (or reuse) the lab, run a workload with faults, drain, "
        "write store/<test>/<start-time>/ and check it. Exit status: 0 valid (or "
        "--no-check), 1 invalid, 3 unknown, 2 bad parameters, 130 interrupted.",
    )
    add_arguments(parser)
    parser.set_defaults(func=main)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Numbers are parsed here (not by argparse) so a bad one gets our one-line error.
    add = parser.add_argument
    add("--workload", required=True, help="|".join(WORKLOADS))
    add("--time-limit", default="30", help="seconds of main phase (default 30)")
    add("--concurrency", default="4", help="number of client processes (default 4)")
    add("--rate", default="200", help="ops per second over all paced clients (default 200)")
    add("--seed", default="0", help="seed of every generator (default 0)")
    add("--keys", default="8", help="number of keys (partitions) written (default 8)")
    add("--partitions-per-topic", default="4", help="partitions per topic (default 4)")
    add("--topics", default=None, help="number of topics (default: as many as the keys need)")
    add("--batch", default="1", help="sends per producer op (default 1)")
    add("--nodes", default="3", help="brokers in the lab (default 3)")
    add_lab_arguments(parser)
    add_system_arguments(parser)
    add("--store", default="store", help="store directory (default ./store)")
    add("--name", default=None, help="test name (default kafka-<workload>)")
    add("--drain-time-limit", default="60", help="seconds the final drain may take")
    add("--acks", default="all", choices=["all", "1", "0", "-1"])
    add("--idempotence", default="true", choices=["true", "false"])
    add("--max-in-flight", default="5")
    add("--retries", default=None)
    add("--isolation", default="read_committed", choices=["read_committed", "read_uncommitted"])
    add("--subscribe", action="store_true", help="consumers poll through a consumer group")
    add("--auto-commit", action="store_true", help="consumers auto-commit (group workload)")
    add("--transaction-timeout-ms", default="10000")
    add("--min-insync-replicas", default=None, help="default: min(2, replication factor)")
    add("--replication-factor", default=None, help="default: min(3, nodes)")
    add("--client-netns", action="store_true", help="start each client in a network namespace of its own")
    add(
        "--unclean-leader-election",
        default="false",
        choices=["true", "false"],
        help="topic setting unclean.leader.election.enable (default false)",
    )
    add(
        "--topic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another setting of the run's topics, e.g. flush.messages=1 (repeatable)",
    )
    add(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another librdkafka setting of every producer, e.g. batch.num.messages=1 (repeatable)",
    )
    add(
        "--consumer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another librdkafka setting of every consumer, e.g. auto.commit.interval.ms=5000 (repeatable)",
    )
    add(
        "--process-ms",
        default="0",
        help="consumers spend this long processing what a poll returned before the op completes "
        "(default 0); an auto commit can land meanwhile",
    )
    add(
        "--resend",
        action="store_true",
        help="a client that replaces a killed one (or a zombie's partner) first sends again what "
        "the old one had in flight, as an application retrying its unsure writes does",
    )
    add(
        "--zombie-kind",
        default="transactional",
        choices=["transactional", "idempotent"],
        help="zombie workload: instances share a transactional.id (default) or are plain "
        "idempotent producers, which nothing fences",
    )
    add(
        "--copier-offsets",
        default="txn",
        choices=["txn", "after", "before"],
        help="eos workload: copiers commit their input offsets in the transaction (default), or "
        "outside it, after producing or before processing",
    )
    add(
        "--hang",
        default=None,
        choices=["inside", "between"],
        help="txn workload: now and then pause a transactional client inside a transaction, or "
        "between two, for --hang-s seconds",
    )
    add("--hang-s", default=None, help="how long a --hang lasts (default: transaction timeout + 5 s)")
    add(
        "--txn-hold-ms",
        default="0",
        help="txn workload: time between a transaction's acknowledged writes and its commit "
        "(default 0; --hang inside pauses a client then)",
    )
    add(
        "--data-on",
        default=None,
        choices=["disk", "powerfs"],
        help="where a new lab keeps the brokers' data (default: powerfs when --nemesis has power-loss, else disk)",
    )
    add("--no-check", action="store_true", help="skip the checker and the report")
    add_nemesis_arguments(parser)


def _int(args, name: str, low: int | None = None, high: int | None = None) -> int:
    raw = getattr(args, name.replace("-", "_"))
    try:
        value = int(str(raw))
    except ValueError:
        raise GregorError(f"--{name} must be a whole number, got {raw!r}") from None
    if low is not None and value < low:
        raise GregorError(f"--{name} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise GregorError(f"--{name} must be at most {high}, got {value}")
    return value


def _float(args, name: str, positive: bool = True) -> float:
    raw = getattr(args, name.replace("-", "_"))
    try:
        value = float(str(raw))
    except ValueError:
        raise GregorError(f"--{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or (positive and value <= 0):
        raise GregorError(f"--{name} must be a positive number, got {raw!r}")
    return value


def nemesis_faults(args) -> list[str]:
    raw = getattr(args, "nemesis", None)
    if raw is None:
        return []
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    faults = [str(i).strip() for i in items if str(i).strip()]
    return [] if faults in ([], ["none"]) else faults


def node_faults(backend: str, system: str, options: dict | None) -> frozenset:
    """The faults the system takes on its nodes on this backend, with the
    composite faults whose parts it takes."""
    return with_composites(registry.system_class(system).node_faults(registry.backend(backend).faults, options or {}))


def check_faults_possible(
    backend: str,
    faults: list[str],
    system: str = "kafka",
    options: dict | None = None,
    targets: list[str] | None = None,
) -> list[str] | None:
    """A fault the backend, or the system on it, cannot take is refused before
    anything starts. Returns the targets the run uses: when a fault can only
    hit clients (kfake's one node has no peers to be cut from; an external
    cluster's brokers are not ours), the default targets narrow to clients;
    named node targets that no fault can take are refused."""
    from nemesis.schedule import CLIENT_FAULTS, CLIENT_ONLY_FAULTS, DEFAULT_TARGETS

    can = with_composites(registry.backend(backend).faults)
    cannot = [fault for fault in faults if fault not in can and fault not in CLIENT_ONLY_FAULTS]
    if cannot:
        raise GregorError(
            f"the {backend} backend cannot inject {cannot[0]} faults; it can do: "
            f"{', '.join(sorted(can)) or 'none'} (change --nemesis)"
        )
    on_nodes = node_faults(backend, system, options)
    for fault in faults:
        if fault not in on_nodes and fault not in CLIENT_FAULTS and fault not in CLIENT_ONLY_FAULTS:
            raise GregorError(
                f"the {system} system cannot take {fault} faults on the {backend} backend "
                f"({_why_not(system)}); it takes: {', '.join(_takes(on_nodes))} (change --nemesis)"
            )
    if not faults or all(fault in on_nodes for fault in faults):
        return targets
    chosen = list(targets or DEFAULT_TARGETS)
    node_targets = [t for t in chosen if not t.startswith("client")]
    if targets is None or list(targets) == list(DEFAULT_TARGETS):
        if not any(fault in on_nodes for fault in faults):
            return [t for t in chosen if t.startswith("client")]
        return chosen
    if node_targets and not any(fault in on_nodes for fault in faults):
        raise GregorError(
            f"the {system} system takes {', '.join(faults)} only on clients here "
            f"({_why_not(system)}): target {node_targets[0]!r} needs node access; use client"
        )
    return chosen


def _takes(on_nodes) -> list[str]:
    from nemesis.schedule import CLIENT_FAULTS

    return [f"{fault} of nodes" for fault in sorted(on_nodes)] + [
        f"{fault} of clients" for fault in CLIENT_FAULTS if fault not in on_nodes
    ]


def _why_not(system: str) -> str:
    return registry.system_class(system).FAULT_LIMITS


# librdkafka settings a run sets from its own flags: refused in --producer-config/--consumer-config
OWN_SETTINGS = {
    "bootstrap.servers",
    "acks",
    "enable.idempotence",
    "transactional.id",
    "group.id",
    "isolation.level",
    "enable.auto.commit",
    "max.in.flight.requests.per.connection",
    "retries",
    "transaction.timeout.ms",
}
TOPIC_SETTINGS_OWN = {
    "min.insync.replicas": "--min-insync-replicas",
    "unclean.leader.election.enable": "--unclean-leader-election",
}


def key_values(args, name: str, refused: dict) -> dict[str, str]:
    """KEY=VALUE items of a repeatable option, each checked."""
    found = {}
    for item in getattr(args, name.replace("-", "_")) or []:
        key, sep, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise GregorError(f"--{name} {item!r}: use KEY=VALUE, e.g. --{name} linger.ms=0")
        if key in refused:
            raise GregorError(f"--{name} {key}: set it with {refused[key]} instead")
        found[key] = value
    return found


def validate(args) -> dict:
    """Every parameter checked; a dict of clean values. Raises GregorError."""
    from harness.controller.run import workload_module

    if args.workload not in WORKLOADS:
        raise GregorError(f"unknown workload {args.workload!r}; choose one of " + ", ".join(WORKLOADS))
    module = workload_module(args.workload)
    cfg = {
        "workload": args.workload,
        "time_limit": _float(args, "time-limit"),
        "concurrency": _int(args, "concurrency", 1, 256),
        "rate": _float(args, "rate"),
        "seed": _int(args, "seed"),
        "keys": _int(args, "keys", 1),
        "partitions_per_topic": _int(args, "partitions-per-topic", 1, 1000),
        "batch": _int(args, "batch", 1, 10000),
        "nodes": _int(args, "nodes", 1, 9),
        "drain_time_limit": _float(args, "drain-time-limit"),
        "max_in_flight": _int(args, "max-in-flight", 1, 1000),
        "retries": None if args.retries is None else _int(args, "retries", 0),
        "transaction_timeout_ms": _int(args, "transaction-timeout-ms", 1000),
        "min_insync": (None if args.min_insync_replicas is None else _int(args, "min-insync-replicas", 1)),
        "version": args.version,
        "backend": args.backend,
        "backend_options": backend_options(args),
        "system": args.system,
        "lab": lab_name(args.lab, args.backend),
        "store": args.store,
        "acks": "all" if args.acks == "-1" else args.acks,
        "idempotence": args.idempotence == "true",
        "isolation": args.isolation,
        "subscribe": bool(args.subscribe),
        "auto_commit": bool(args.auto_commit),
        "client_netns": bool(args.client_netns),
        "check": not args.no_check,
        "nemesis": nemesis_faults(args),
    }
    own = {k: "the run's own flag" for k in OWN_SETTINGS}
    cfg.update(
        {
            "unclean_election": args.unclean_leader_election == "true",
            "topic_config": key_values(args, "topic-config", TOPIC_SETTINGS_OWN),
            "producer_config": key_values(args, "producer-config", own),
            "consumer_config": key_values(args, "consumer-config", own),
            "process_ms": _int(args, "process-ms", 0, 600000),
            "resend": bool(args.resend),
            "zombie_kind": args.zombie_kind,
            "copier_offsets": args.copier_offsets,
            "hang": args.hang,
            "txn_hold_ms": _int(args, "txn-hold-ms", 0, 600000),
            "nemesis_shape": getattr(args, "nemesis_shape", None),
            "nemesis_hold": getattr(args, "nemesis_hold", None),
        }
    )
    cfg["hang_s"] = cfg["transaction_timeout_ms"] / 1000 + 5 if args.hang_s is None else _float(args, "hang-s")
    for flag, workload, used in (
        ("--zombie-kind", "zombie", args.zombie_kind != "transactional"),
        ("--copier-offsets", "eos", args.copier_offsets != "txn"),
        ("--hang", "txn", args.hang is not None),
    ):
        if used and args.workload != workload:
            raise GregorError(f"{flag} is for the {workload} workload, not {args.workload}")
    if args.hang == "inside" and not cfg["txn_hold_ms"]:
        raise GregorError(
            "--hang inside needs --txn-hold-ms above 0 (try 200): the client is "
            "paused while it holds a transaction whose writes are acknowledged"
        )
    cfg["storage"] = args.data_on or ("powerfs" if POWER_LOSS in cfg["nemesis"] else "disk")
    if POWER_LOSS in cfg["nemesis"] and cfg["storage"] != "powerfs":
        raise GregorError("--nemesis power-loss needs --data-on powerfs (a plain disk cannot lose power)")
    if cfg["concurrency"] < module.MIN_CONCURRENCY:
        raise GregorError(
            f"--concurrency {cfg['concurrency']} is too low: the "
            f"{args.workload} workload needs at least {module.MIN_CONCURRENCY}"
        )
    if cfg["idempotence"] and args.workload in ("queue", "group", "eos"):
        if cfg["acks"] != "all":
            raise GregorError(
                f"--acks {cfg['acks']} needs --idempotence false (an idempotent producer requires acks=all)"
            )
        if cfg["max_in_flight"] > 5:
            raise GregorError(
                f"--max-in-flight {cfg['max_in_flight']} needs --idempotence false "
                "(an idempotent producer allows at most 5)"
            )
    rf = min(3, cfg["nodes"])
    if args.replication_factor is not None:
        rf = _int(args, "replication-factor", 1, cfg["nodes"])
    if args.min_insync_replicas is None:
        cfg["min_insync"] = min(2, rf)
    cfg["replication_factor"] = rf
    if cfg["min_insync"] > rf:
        raise GregorError(f"--min-insync-replicas {cfg['min_insync']} exceeds the replication factor {rf}; lower it")
    total_keys = cfg["keys"] * (2 if args.workload == "eos" else 1)
    per_topic = cfg["partitions_per_topic"]
    if args.topics is not None:
        topics = _int(args, "topics", 1)
        if total_keys > topics * per_topic:
            raise GregorError(
                f"--keys {cfg['keys']} needs {total_keys} partitions but --topics {topics} x "
                f"--partitions-per-topic {per_topic} gives {topics * per_topic}; "
                "raise one of them or lower --keys"
            )
    if total_keys > MAX_PARTITIONS:
        raise GregorError(
            f"--keys {cfg['keys']} needs {total_keys} partitions, more than "
            f"the {MAX_PARTITIONS} partitions a lab allows; lower --keys"
        )
    cfg["topics"] = None if args.topics is None else int(args.topics)
    cfg["nemesis_interval"] = _float(args, "nemesis-interval") if cfg["nemesis"] else None
    cfg["system_options"] = system_options(args)
    cfg["client_config"] = client_config(args)
    targets = getattr(args, "nemesis_targets", None)
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    cfg["nemesis_targets"] = check_faults_possible(
        args.backend, cfg["nemesis"], args.system, cfg["system_options"], targets
    )
    on_nodes = node_faults(args.backend, args.system, cfg["system_options"])
    if PARTITION in cfg["nemesis"] and PARTITION not in on_nodes:
        cfg["client_netns"] = True  # only clients can be cut off, each in a place of its own
    if cfg["nemesis"]:
        from nemesis.schedule import DEFAULT_TARGETS, check_shape, plan

        chosen = cfg["nemesis_targets"] or DEFAULT_TARGETS
        check_shape(cfg["nemesis_shape"], chosen)
        next(plan(cfg["nemesis"], chosen, 0, cfg["nemesis_interval"], node_faults=on_nodes), None)
    cfg["name"] = args.name or f"{args.system}-{args.workload}"
    if not all(c.isalnum() or c in "-_." for c in cfg["name"]):
        raise GregorError(f"--name {cfg['name']!r} may hold only letters, digits, '-', '_' and '.'")
    return cfg


def main(args) -> int:
    cfg = validate(args)
    from harness.controller.run import run

    return run(cfg)
