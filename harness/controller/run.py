"""One run: lab, topics, clients, faults, drain, store, check.

The controller process never talks Kafka on the clients' behalf: it spawns
client processes, writes the one history, drives the nemesis and the
workload's own conductors, and finally drains. Everything it started is
stopped and healed in `finally`, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import importlib
import os
import resource
import sys
import threading
import time
from importlib import metadata

from ground.errors import GregorError
from ground.faults import WIRE
from ground.signals import sigterm_as_interrupt
from harness.controller.run_config import RunConfig
from harness.lab import Lab, StaleLab
from nemesis.ledger import Ledger
from nemesis.schedule import wire_broker_sources, wire_client_sources
from workloads.client import ClientSpec
from workloads.client_pool import ClientPool
from workloads.client_registry import kill_leftover_clients
from workloads.conductor import ClientFaults
from workloads.context import RunContext
from workloads.drain import OffsetsLearned
from workloads.guarded_drain import guarded_drain
from workloads.history_writer import HistoryWriter
from workloads.kafka_client import JAVA
from workloads.store import new_run_dir, write_json

PACED_ROLES = {"producer", "txn", "zombie", "feeder"}
PROGRESS_EVERY_S = 5.0


def say(message: str) -> None:
    print(message, flush=True)


def workload_module(name: str):
    return importlib.import_module(f"workloads.{name}")


def key_map(workload: str, keys: int, per_topic: int, prefix: str, topics: int | None = None) -> dict:
    """key -> [topic, partition]; eos has input keys 0..K-1 and output keys K..2K-1.

    Without `topics`, keys fill topics of `per_topic` partitions in order;
    with it, keys go round-robin over that many topics.
    """
    groups = [("t", keys)] if workload != "eos" else [("in", keys), ("out", keys)]
    result, key = {}, 0
    for label, count in groups:
        for i in range(count):
            if topics:
                result[str(key)] = [f"{prefix}-{label}{i % topics}", i // topics]
            else:
                result[str(key)] = [f"{prefix}-{label}{i // per_topic}", i % per_topic]
            key += 1
    return result


def topic_partitions(keys: dict, per_topic: int) -> dict[str, int]:
    topics: dict[str, int] = {}
    for topic, _partition in keys.values():
        topics[topic] = per_topic
    return topics


def versions(cfg: RunConfig | None = None) -> dict:
    found = {"python": sys.version.split()[0]}
    for package in ("gregor", "confluent-kafka"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    try:
        import confluent_kafka

        found["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    if cfg is not None and cfg.client == JAVA:
        found["kafka-clients"] = cfg.client_version
    return found


def prepare_client(cfg: RunConfig) -> None:
    """Kafka's Java client of the run's version, built now where it is missing (Maven, javac,
    a class-data archive: a minute or two, said as it goes), so no client waits for it."""
    if cfg.client == JAVA:
        from workloads.java_client import build

        build.install(cfg.client_version, progress=say)


def transaction_protocol_seen(lab, cfg: RunConfig, run_id: str) -> dict | None:
    """test.json's "transaction_protocol": what the brokers' transaction log says each of the
    run's transactional ids used (a transactional run on a system that can tell)."""
    if not cfg.transactional:
        return None
    reader = getattr(lab.system, "transaction_log", None)
    if reader is None:
        return {"error": f"the {lab.system.name} system's transaction log cannot be read"}
    found = reader(lab, f"gregor-{run_id}-")
    if "error" in found:
        say(f"transaction protocol: not read ({found['error']})")
    else:
        from reports.render import protocol_counts_text

        say(f"transaction protocol: {found['protocol']} (ids: {protocol_counts_text(found['transactional_ids'])})")
    return found


def open_lab(cfg: RunConfig) -> Lab:
    """The lab the run asks for: the running one of that name if it matches, else a new one.

    A lab whose machines are gone (`Lab.attach` asks before anything reaches
    them) is refused with StaleLab, never replaced behind the user's back."""
    options = cfg.system_options or {}
    try:
        lab = Lab.attach(cfg.lab, backend=cfg.backend, client_config=cfg.client_config)
    except StaleLab:
        raise
    except GregorError:
        lab = None
    if lab is not None:
        have = (lab.backend.name, lab.system.name, lab.brokers, lab.version, lab.storage)
        want = (
            cfg.backend,
            cfg.system,
            cfg.nodes,
            lab.version if cfg.version in (None, "latest") else cfg.version,
            cfg.storage,
        )
        differs = [
            f"{key} {lab.system.options.get(key)}"
            for key, value in options.items()
            if str(getattr(lab.system, "options", {}).get(key)) != str(value)
        ]
        if have != want or differs:
            raise GregorError(
                f"lab {lab.name!r} is up with {have[2]} brokers of {have[1]} {have[3]} on the {have[0]} backend "
                f"(data on {have[4]}{', ' + ', '.join(differs) if differs else ''}), not {want[2]} of {want[1]} "
                f"{want[3]} on {want[0]} (data on {want[4]}); run: gregor lab down --lab {lab.name}"
            )
        if cfg.backend_options and cfg.backend_options != lab.backend_options:
            raise GregorError(
                f"lab {lab.name!r} is up on other hosts or with other {lab.backend.name} options "
                f"than given; run: gregor lab down --lab {lab.name} --backend {lab.backend.name}"
            )
        say(
            f"lab {lab.name}: reusing ({len(lab.nodes)} nodes, {lab.system.name} {lab.version}, "
            f"{lab.backend.name} backend)"
        )
        return lab
    return Lab.up(
        nodes=cfg.nodes,
        version=cfg.version,
        name=cfg.lab,
        progress=say,
        backend=cfg.backend,
        system=cfg.system,
        system_options=options,
        client_config=cfg.client_config,
        backend_options=cfg.backend_options,
        storage=cfg.storage,
    )


def learn_cluster(lab, cfg: RunConfig) -> dict:
    """Asks the brokers what they serve (ApiVersions) and refuses, in one
    line, a workload they cannot serve; returns test.json's "cluster"."""
    from harness.systems import capabilities

    cluster = lab.cluster_info()
    capabilities.refuse_unservable(
        cluster,
        lab.system.name,
        lab.version,
        cfg.workload,
        idempotence=cfg.idempotence,
        subscribe=cfg.subscribe,
    )
    return cluster


def transaction_protocol(cluster: dict) -> int | None:
    """The broker's transaction protocol version (the finalized transaction.version
    feature; 0 when none is finalized), where the brokers serve transactions at all."""
    from harness.systems import capabilities

    if str(capabilities.END_TXN) not in cluster["api_versions"]:
        return None
    return capabilities.feature_level(cluster, "transaction.version")


def heal_before(lab) -> None:
    """What a crashed run left: client processes, then faults, then a wire relay and its rules."""
    from nemesis.heal import heal_leftovers

    kill_leftover_clients(lab.name, progress=say)
    heal_leftovers(lab, progress=say)
    swept = lab.sweep_wire()
    if swept["relays"] or swept["redirects_removed"]:
        say(f"wire: swept what a crashed run left ({swept['relays']} relay(s), {swept['redirects_removed']} rule(s))")


def build_specs(
    cfg: RunConfig,
    module,
    keys: dict,
    bootstrap: str,
    start_ns: int,
    deadline: float,
    run_id: str,
    lab,
    log_dir: str | None = None,
) -> list[ClientSpec]:
    all_keys = sorted(int(k) for k in keys)
    n = cfg.concurrency
    options = cfg.client_options()
    slots = module.layout(n, all_keys, options)
    paced = sum(1 for s in slots if s["role"] in PACED_ROLES) or 1
    specs = []
    group = f"gregor-{run_id}-group"
    for slot, layout in enumerate(slots):
        txn_id = None
        if layout.get("txn"):
            txn_id = f"gregor-{run_id}-{layout.get('txn_id_suffix', f'txn-{slot}')}"
        place = lab.client_place(f"c{slot}") if cfg.client_netns else None
        specs.append(
            ClientSpec(
                slot=slot,
                process=slot,
                role=layout["role"],
                module=module.__name__,
                stride=n,
                seed=cfg.seed,
                keys=list(layout["keys"]),
                key_map=keys,
                bootstrap=bootstrap,
                options={**options, **layout.get("options", {})},
                start_ns=start_ns,
                deadline=deadline,
                rate=cfg.rate / paced if layout["role"] in PACED_ROLES else 0.0,
                txn_id=txn_id,
                client_config=dict(cfg.client_config or {}),
                group=group
                if (layout.get("group") or (cfg.subscribe and layout["role"] in ("consumer", "txn", "member")))
                else None,
                place=place,
                extra=dict(layout.get("extra", {})),
                log_path=os.path.join(log_dir, f"client-{slot}.log") if log_dir else None,
            )
        )
    return specs


def conductors_for(
    cfg: RunConfig, specs: list[ClientSpec], faults: ClientFaults, pool, deadline: float, lab=None, test=None
) -> list:
    if cfg.workload == "zombie":
        from workloads.zombie import ZombieConductor

        pairs: dict[int, list[int]] = {}
        txn_ids = {}
        for spec in specs:
            pairs.setdefault(spec.extra["pair"], []).append(spec.slot)
            txn_ids[spec.extra["pair"]] = spec.txn_id
        return [ZombieConductor(faults, pool, pairs, cfg.seed, txn_ids, deadline=deadline, resend=cfg.resend)]
    if cfg.workload == "group":
        from workloads.group import GroupConductor

        members = [s.slot for s in specs if s.role == "member"]
        return [GroupConductor(faults, members, cfg.seed, session_timeout_s=6.0, deadline=deadline)]
    if cfg.workload == "script":
        from workloads.script import ScriptConductor

        return [ScriptConductor(faults, pool, lab, test, specs[0].slot, cfg.script, deadline=deadline)]
    if cfg.workload == "txn" and cfg.hang:
        from workloads.txn import HangConductor

        return [HangConductor(faults, pool, [s.slot for s in specs], cfg.seed, cfg.hang, cfg.hang_s, deadline=deadline)]
    return []


class Progress:
    """Counts completions as they are recorded; prints a line every few seconds."""

    def __init__(self, learned: OffsetsLearned):
        self.learned = learned
        self.lock = threading.Lock()
        self.by_type = {"ok": 0, "fail": 0, "info": 0}
        self.acked_sends = 0
        self.faults = 0
        self.last = (time.monotonic(), 0, 0)

    def observe(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "invoke":
            return
        with self.lock:
            self.by_type[kind] = self.by_type.get(kind, 0) + 1
            if kind == "ok":
                self.acked_sends += sum(1 for m in event.get("mops") or () if m.get("f") == "send")
        self.learned.observe(event)

    def observe_fault(self, event: dict) -> None:
        if event.get("process") == "nemesis" and event.get("type") == "info":
            with self.lock:
                self.faults += 1

    def line(self, elapsed: float, live: int) -> str:
        now = time.monotonic()
        with self.lock:
            ops = sum(self.by_type.values())
            sends = self.acked_sends
            counts = dict(self.by_type)
        then, ops0, sends0 = self.last
        span = max(1e-6, now - then)
        self.last = (now, ops, sends)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return (
            f"t={elapsed:5.1f}s  {(ops - ops0) / span:7.0f} ops/s  "
            f"{(sends - sends0) / span:7.0f} acked sends/s  ok {counts['ok']} "
            f"fail {counts['fail']} info {counts['info']}  clients {live}  "
            f"faults {self.faults}  controller cpu {usage.ru_utime + usage.ru_stime:.1f}s"
        )


def run(cfg: RunConfig) -> int:
    module = workload_module(cfg.workload)
    prepare_client(cfg)
    lab = open_lab(cfg)
    heal_before(lab)
    cluster = learn_cluster(lab, cfg)

    start_wall = time.time()
    run_dir = new_run_dir(cfg.store, cfg.name, start_wall)
    prefix = f"g{os.path.basename(run_dir).lower()}"
    keys = key_map(cfg.workload, cfg.keys, cfg.partitions_per_topic, prefix, cfg.topics)
    admin = lab.admin(timeout=15)
    topic_config = cfg.topic_configs()
    topics = topic_partitions(keys, cfg.partitions_per_topic)
    for topic, partitions in topics.items():
        admin.create_topic(topic, partitions, replication_factor=cfg.replication_factor, config=topic_config)
    lab.wait_healthy(topics=list(topics), timeout=60)
    say(f"run {run_dir}: {len(keys)} keys on {len(topics)} topic(s)")

    setup = lab.describe()
    if transaction_protocol(cluster) is not None:
        setup["transaction.version"] = transaction_protocol(cluster)
    test = {
        "name": cfg.name,
        "system": setup["system"],
        "version": lab.version,
        "backend": setup["backend"],
        "setup": setup,
        "workload": cfg.workload,
        "seed": cfg.seed,
        "concurrency": cfg.concurrency,
        "keys": keys,
        "client": cfg.client_record(),
        "broker": cfg.topic_settings(),
        "time_limit_s": cfg.time_limit,
        "rate": cfg.rate,
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start_wall)),
        "start_wall_s": start_wall,
        "lab": lab.name,
        "nodes": [{"name": n.name, "address": n.address} for n in lab.nodes],
        "broker_config": dict(lab.broker_config),
        "cluster": cluster,
        # names only: the values may be credentials (never written to a run's files)
        "client_config_keys": sorted(cfg.client_config or {}),
        "versions": versions(cfg),
        "nemesis": {"faults": cfg.nemesis, "interval_s": cfg.nemesis_interval, "targets": cfg.nemesis_targets},
        "drain": {"time_limit_s": cfg.drain_time_limit, "complete": False},
        "run": cfg.as_options(),
    }
    test_path = os.path.join(run_dir, "test.json")
    write_json(test_path, test)

    start_ns = time.monotonic_ns()
    writer = HistoryWriter(os.path.join(run_dir, "history.jsonl"), start_ns=start_ns)
    learned = OffsetsLearned()
    progress = Progress(learned)
    pool = ClientPool(writer, lab.name, observe=progress.observe, log=say, resend=cfg.resend)
    ctx = RunContext(lab, test, writer, pool.infos, on_record=progress.observe_fault, kill_client=pool.kill_process)
    deadline = time.monotonic() + main_phase_s(cfg)
    specs = build_specs(
        cfg,
        module,
        keys,
        lab.bootstrap_servers,
        start_ns,
        deadline,
        os.path.basename(run_dir),
        lab,
        log_dir=os.path.join(run_dir, "clients"),
    )
    os.makedirs(os.path.join(run_dir, "clients"), exist_ok=True)
    faults = ClientFaults(pool, ctx.record, Ledger.for_lab(lab.name), op_lock=ctx.nemesis_op)
    conductors = conductors_for(cfg, specs, faults, pool, deadline, lab, test)
    runner = None
    interrupted = False
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.monotonic()
    with sigterm_as_interrupt():
        try:
            if WIRE in cfg.nemesis and wire_broker_sources(cfg.nemesis_targets):
                start_broker_wire(lab, test, list(topics), run_dir)
                write_json(test_path, test)
            if cfg.workload == "script" or (WIRE in cfg.nemesis and wire_client_sources(cfg.nemesis_targets)):
                # in place before any client connects
                test["wire_relay"] = lab.start_wire(
                    [spec.place for spec in specs], log_path=os.path.join(run_dir, "clients", "wire-relay.log")
                )
                write_json(test_path, test)
                say(f"wire: relay serving {len(test['wire_relay']['places'])} client place(s)")
            for spec in specs:
                pool.spawn(spec)
            if cfg.nemesis:
                from nemesis.runner import NemesisRunner

                runner = NemesisRunner(
                    ctx,
                    faults=cfg.nemesis,
                    interval_s=cfg.nemesis_interval,
                    targets=cfg.nemesis_targets,
                    seed=cfg.seed,
                    progress=say,
                    deadline=deadline,
                    shape=cfg.nemesis_shape,
                    hold_s=cfg.nemesis_hold,
                    wire_rules=cfg.wire_rule,
                )
                runner.start()
            for conductor in conductors:
                conductor.start()
            say(f"main phase: {cfg.workload} with {len(specs)} clients for {main_phase_s(cfg):g} s")
            next_report = time.monotonic() + PROGRESS_EVERY_S
            while time.monotonic() < deadline and pool.alive():
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                if time.monotonic() >= next_report:
                    say(progress.line(time.monotonic() - wall0, pool.alive()))
                    next_report += PROGRESS_EVERY_S
        except KeyboardInterrupt:
            interrupted = True
            say("interrupted: stopping clients and healing")
        finally:
            for conductor in conductors:
                conductor.stop()
            if runner is not None:
                runner.stop()
            pool.stop_all()
            if WIRE in cfg.nemesis or cfg.workload == "script":  # also when a relay failed half-way into place
                stop_wire(lab, test)
            remove_client_places(lab, specs)
            lab.collect(run_dir)
    main_wall = time.monotonic() - wall0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    say(progress.line(main_wall, 0))

    if runner is not None:
        test["nemesis"]["schedule"] = runner.schedule_summary()
    test["main_phase"] = {
        "seconds": round(main_wall, 3),
        "controller_cpu_s": round(cpu, 3),
        "controller_cpu_share": round(cpu / max(main_wall, 1e-6), 4),
        "ok": progress.by_type.get("ok", 0),
        "fail": progress.by_type.get("fail", 0),
        "info": progress.by_type.get("info", 0),
        "acked_sends": progress.acked_sends,
        "interrupted": interrupted,
    }
    if not interrupted:
        say(
            f"drain: reading every key until {sum(1 for _ in learned.highest)} key(s) "
            f"reach their highest known offset (limit {cfg.drain_time_limit:g} s)"
        )
        drain_process = max(pool.max_process, cfg.concurrency - 1) + 1
        test["drain"] = guarded_drain(
            writer,
            keys,
            lab.bootstrap_servers,
            dict(learned.highest),
            drain_process,
            cfg.isolation,
            cfg.drain_time_limit,
            lab.name,
            progress=say,
            log_path=os.path.join(run_dir, "clients", "drain.log"),
            client_config=cfg.client_config,
            library=cfg.client,
            library_version=cfg.client_version,
        )
        say(
            f"drain: {'complete' if test['drain']['complete'] else 'INCOMPLETE'} after "
            f"{test['drain']['seconds']} s, {test['drain']['records']} records"
        )
    writer.close()
    protocol = transaction_protocol_seen(lab, cfg, os.path.basename(run_dir))
    if protocol is not None:
        test["transaction_protocol"] = protocol
    test["events"] = writer.size
    write_json(test_path, test)
    say(f"history: {writer.size} events in {os.path.join(run_dir, 'history.jsonl')}")
    if interrupted:
        return 130
    if cfg.check:
        from checkers.cli import EXIT_CODES

        return EXIT_CODES[check_and_report(run_dir, lab)]  # as `gregor check`: 0 valid, 1 invalid, 3 unknown
    return 0


def start_broker_wire(lab, test: dict, topics: list[str], run_dir: str) -> None:
    """The relay on the brokers' own connections (broker sources), before the run's first op: the
    connections the brokers had opened are cut once so that they reopen through it, then the run
    waits until the topics are healthy again (test.json's "wire_brokers" says how many were cut)."""
    test["wire_brokers"] = served = lab.start_broker_wire(
        log_path=os.path.join(run_dir, "clients", "wire-relay-brokers.log")
    )
    say(
        f"wire: relay on the connections between {len(served['places'])} broker(s); cut "
        f"{sum(served['cut'].values())} inter-broker connection(s) opened before it, once; "
        f"{sum(served['reconnected'].values())} reopened through it"
    )
    lab.wait_healthy(topics=topics, timeout=60)


def main_phase_s(cfg: RunConfig) -> float:
    """--time-limit; a script runs to its end whatever it says (workloads/script.py LONGEST_S):
    a reproduction cut short proves nothing. The script's last step ends the phase."""
    if cfg.workload == "script":
        from workloads.script import LONGEST_S

        return max(cfg.time_limit, LONGEST_S)
    return cfg.time_limit


def stop_wire(lab, test: dict) -> None:
    """Each relay's own counts into test.json ("wire_relay", "wire_brokers"), then the relays and
    their rules swept."""
    for field, brokers in (("wire_relay", False), ("wire_brokers", True)):
        if field not in test:
            continue
        try:
            status = lab.wire_call({"op": "status"}, brokers=brokers)
            test[field]["final"] = {key: status.get(key) for key in ("accepted", "refused", "desync", "requests")}
        except GregorError as error:
            test[field]["final"] = {"error": str(error)}
    try:
        lab.sweep_wire()
    except GregorError as error:  # never mask the run's own outcome; the next run's heal sweeps again
        say(f"could not sweep the wire relay: {error}")


def remove_client_places(lab, specs) -> None:
    """The client places --client-netns made (the lab's heal_all would too)."""
    for spec in specs:
        if spec.place is not None:
            try:
                lab.remove_client_place(spec.place.name)
            except Exception as error:  # never mask the run's own outcome
                say(f"could not remove client place {spec.place.name}: {error}")


def check_and_report(run_dir: str, lab=None) -> str | None:
    """The checker, then (given the run's lab, still up) the brokers' own record of the
    partitions its anomalies name (evidence/segments.json), then the report (page,
    junit.xml, the store's index); the verdict."""
    from checkers.check import check_dir
    from harness.controller.evidence import collect
    from reports.cli import publish

    verdict = check_dir(run_dir)["verdict"]
    say(f"check: verdict {verdict}")
    if lab is not None:
        collect(lab, run_dir, progress=say)
    say(f"report: {publish(run_dir, progress=say)}")
    return verdict
