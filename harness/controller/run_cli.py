"""`gregor run`: parse and check every parameter before anything starts."""

from __future__ import annotations

import argparse

from ground.errors import GregorError
from ground.faults import PARTITION, POWER_LOSS, WIRE, with_composites
from ground.options import add_options
from harness import registry
from harness.controller.run_config import OPTIONS, SETTINGS, RunConfig
from workloads.script import SCRIPTS

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
    """Every option of `gregor run`, as run_config.py declares it. Numbers are kept as text
    here and parsed by validate, so a bad one gets its one-line error rather than argparse's usage."""
    add_options(parser, OPTIONS)


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
    # a fault that can hit clients is refused below only if a node target needs the backend for it
    cannot = [fault for fault in faults if fault not in can and fault not in CLIENT_ONLY_FAULTS + CLIENT_FAULTS]
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


def validate(args) -> RunConfig:
    """Every parameter checked, and what the options leave open settled; raises GregorError."""
    from harness.controller.run import workload_module

    values = {}
    for name, setting in SETTINGS.items():
        if setting.only_with and not values[setting.only_with]:
            values[name] = None
        elif setting.options:
            values[name] = setting.value_from(args)
    workload = values["workload"]
    module = workload_module(workload)
    for name, setting in SETTINGS.items():
        if setting.workload and values[name] != setting.default_value and workload != setting.workload:
            raise GregorError(f"{setting.option.flag} is for the {setting.workload} workload, not {workload}")
    if values["hang"] == "inside" and not values["txn_hold_ms"]:
        raise GregorError(
            "--hang inside needs --txn-hold-ms above 0 (try 200): the client is "
            "paused while it holds a transaction whose writes are acknowledged"
        )
    if values["hang_s"] is None:
        values["hang_s"] = values["transaction_timeout_ms"] / 1000 + 5
    nemesis = values["nemesis"]
    values["storage"] = values["storage"] or ("powerfs" if POWER_LOSS in nemesis else "disk")
    if POWER_LOSS in nemesis and values["storage"] != "powerfs":
        raise GregorError("--nemesis power-loss needs --data-on powerfs (a plain disk cannot lose power)")
    if values["concurrency"] < module.MIN_CONCURRENCY:
        raise GregorError(
            f"--concurrency {values['concurrency']} is too low: the "
            f"{workload} workload needs at least {module.MIN_CONCURRENCY}"
        )
    if values["idempotence"] and workload in ("queue", "group", "eos"):
        if values["acks"] != "all":
            raise GregorError(
                f"--acks {values['acks']} needs --idempotence false (an idempotent producer requires acks=all)"
            )
        if values["max_in_flight"] > 5:
            raise GregorError(
                f"--max-in-flight {values['max_in_flight']} needs --idempotence false "
                "(an idempotent producer allows at most 5)"
            )
    settle_replication(values)
    check_partitions(values)
    settle_client(values)
    check_wire(values)
    check_script(values)
    values["nemesis_targets"] = check_faults_possible(
        values["backend"], nemesis, values["system"], values["system_options"], values["nemesis_targets"]
    )
    on_nodes = node_faults(values["backend"], values["system"], values["system_options"])
    if PARTITION in nemesis and PARTITION not in on_nodes:
        values["client_netns"] = True  # only clients can be cut off, each in a place of its own
    if nemesis:
        from nemesis.schedule import DEFAULT_TARGETS, check_shape, plan

        chosen = values["nemesis_targets"] or DEFAULT_TARGETS
        check_shape(values["nemesis_shape"], chosen)
        next(
            plan(nemesis, chosen, 0, values["nemesis_interval"], node_faults=on_nodes, wire_rules=values["wire_rule"]),
            None,
        )
    values["name"] = values["name"] or f"{values['system']}-{workload}"
    if not all(c.isalnum() or c in "-_." for c in values["name"]):
        raise GregorError(f"--name {values['name']!r} may hold only letters, digits, '-', '_' and '.'")
    values["transactional"] = workload in ("txn", "eos", "script") or (
        workload == "zombie" and values["zombie_kind"] == "transactional"
    )
    return RunConfig(**values)


def settle_client(values: dict) -> None:
    """The client library's version, as resolved (the Java client's newest, or the installed
    librdkafka's), and, for Kafka's Java client, a JDK and settings it can honour."""
    from workloads import kafka_client

    version = values["client_version"]
    if values["client"] == kafka_client.LIBRDKAFKA:
        installed = kafka_client.librdkafka_version()
        if version not in (None, installed):
            raise GregorError(
                f"--client-version {version}: librdkafka's version is the installed confluent-kafka's "
                f"({installed}); --client-version chooses the Java client's (with --client java)"
            )
        values["client_version"] = installed
        return
    from workloads.java_client import build, config_table

    if build.installed(version or "") is None:
        build.require_jdk()  # what building needs; a built driver needs only java
    build.java()
    values["client_version"] = build.resolve_version(version)
    config_table.check_settings(
        values["producer_config"], values["consumer_config"], values["client_config"] or {}, "--client java"
    )


def client_protocol(values: dict) -> str:
    """The clients' security.protocol, lower-case: the wire relay reads only "plaintext" frames."""
    return str((values["client_config"] or {}).get("security.protocol", "plaintext")).lower()


def check_wire(values: dict) -> None:
    """Wire faults: rules the relay takes, traffic it can read; client sources put each client in
    a namespace of its own, where the relay serves it; broker sources (a node target) need a system
    and a backend that can put the relay on the brokers' own connections."""
    rules, nemesis = values["wire_rule"], values["nemesis"]
    if WIRE not in nemesis:
        if rules:
            raise GregorError("--wire-rule is for --nemesis wire; add wire to --nemesis or drop the rule")
        return
    from harness.wire.rules import Rule
    from nemesis.wire import parse_rule

    for text in rules:
        try:
            Rule(parse_rule(text), 0.0)
        except ValueError as error:
            raise GregorError(f"--wire-rule {text!r}: {error}") from None
    protocol = client_protocol(values)
    if protocol != "plaintext":
        raise GregorError(
            f"--nemesis wire reads the clients' Kafka frames, which security.protocol={protocol} hides "
            "(TLS, SASL): wire faults need PLAINTEXT clients"
        )
    from nemesis.schedule import wire_broker_sources, wire_client_sources

    targets = values["nemesis_targets"]
    if wire_broker_sources(targets):
        refuse_broker_sources(values["system"], values["backend"], values["system_options"], targets)
    if wire_client_sources(targets):
        values["client_netns"] = True  # the relay serves the clients' own namespaces


def refuse_broker_sources(system: str, backend: str, options: dict | None, targets: list[str]) -> None:
    """Wire faults on the brokers' own traffic (a node target) need Apache Kafka (brokers that talk
    to each other over a listener Gregor knows) on a backend that can put the relay on the nodes
    (local: it enters their namespaces from this host; docker, ssh: it runs on each node); anything
    else is one line."""
    node_target = next(target for target in targets if not target.startswith("client"))
    if WIRE not in node_faults("local", system, options):
        raise GregorError(
            f"wire faults on the brokers' own traffic (target {node_target!r}) are for Apache Kafka labs only, "
            f"not {system}; give a client target (client, client:ROLE)"
        )
    if WIRE not in node_faults(backend, system, options):
        raise GregorError(
            f"wire faults on the brokers' own traffic (target {node_target!r}) cannot run on the {backend} backend "
            "(it cannot put the relay on the nodes); give a client target (client, client:ROLE)"
        )


def check_script(values: dict) -> None:
    """A scripted run: its script named, and its clients where the wire relay serves them
    (the script's conductor switches rules; the relay starts with the run)."""
    if values["workload"] != "script":
        return
    if not values["script"]:
        raise GregorError("--workload script needs --script NAME; the scripts are " + ", ".join(SCRIPTS))
    protocol = client_protocol(values)
    if protocol != "plaintext":
        raise GregorError(
            f"--workload script drives wire faults, which need PLAINTEXT clients, not security.protocol={protocol}"
        )
    values["client_netns"] = True


def settle_replication(values: dict) -> None:
    """The replication factor (default min(3, nodes)) and min.insync.replicas (default min(2, it))."""
    nodes = values["nodes"]
    rf = values["replication_factor"]
    if rf is None:
        rf = min(3, nodes)
    elif rf > nodes:
        raise GregorError(f"--replication-factor must be at most {nodes}, got {rf}")
    values["replication_factor"] = rf
    if values["min_insync"] is None:
        values["min_insync"] = min(2, rf)
    if values["min_insync"] > rf:
        raise GregorError(f"--min-insync-replicas {values['min_insync']} exceeds the replication factor {rf}; lower it")


def check_partitions(values: dict) -> None:
    """The keys fit the topics given, and the lab."""
    keys, per_topic, topics = values["keys"], values["partitions_per_topic"], values["topics"]
    total_keys = keys * (2 if values["workload"] == "eos" else 1)
    if topics is not None and total_keys > topics * per_topic:
        raise GregorError(
            f"--keys {keys} needs {total_keys} partitions but --topics {topics} x "
            f"--partitions-per-topic {per_topic} gives {topics * per_topic}; "
            "raise one of them or lower --keys"
        )
    if total_keys > MAX_PARTITIONS:
        raise GregorError(
            f"--keys {keys} needs {total_keys} partitions, more than "
            f"the {MAX_PARTITIONS} partitions a lab allows; lower --keys"
        )


def main(args) -> int:
    cfg = validate(args)
    from harness.controller.run import run

    return run(cfg)
