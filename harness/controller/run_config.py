"""`gregor run`'s configuration: each option declared once, and the frozen RunConfig it fills.

Every field of RunConfig declares, in one place:
- the option it is read from (flag, help, default, shape: ground/options.py);
- how run_cli.validate turns the option's text into the field's value, with
  the one line a bad value gets;
- where the value goes: its name in the clients' options (ClientSpec.options,
  read by workloads/kafka_io.py and the workload modules), its name in
  test.json's "client" (always, or only away from its default) and its name
  among the topics' settings (test.json's "broker").

The parser (run_cli.add_arguments), the clients' options, test.json's
"client", "broker" and "run" and the catalogue's argument lists
(catalogue.py) all derive from these declarations. The options of the lab
and of the nemesis are declared beside their code (lab_options.py,
nemesis/options.py) and composed in here.

Values an option leaves open (the replication factor, min.insync.replicas,
a hang's length, where the data lives, the targets the system can take,
client namespaces a client-only partition needs, the test's name, whether
the producers are transactional) are settled by run_cli.validate, which
makes the object once; it is frozen and no field is set again.
"""

from __future__ import annotations

import math
from dataclasses import Field, dataclass, field, fields
from typing import Callable

from ground.errors import GregorError
from ground.options import REPEAT, SWITCH, VALUE, Option, to_argv
from harness.controller.lab_options import (
    BACKEND,
    CLIENT_CONFIG,
    LAB,
    SSH_OPTIONS,
    SYSTEM,
    SYSTEM_OPTIONS,
    VERSION,
    backend_options,
    client_config,
    recorded_backend_settings,
    system_options,
)
from nemesis.options import NEMESIS_OPTIONS
from workloads.kafka_client import CLIENTS, LIBRDKAFKA
from workloads.script import SCRIPTS

WORKLOADS = ("queue", "txn", "zombie", "eos", "group", "script")
ALWAYS, AWAY = "always", "away from its default"  # when test.json's "client" records a setting
SPREAD = "*"  # a setting whose own KEY=VALUE pairs are topic settings

# librdkafka settings a run sets from its own flags: refused in --producer-config/--consumer-config
OWN_SETTINGS = (
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
)


# --- how an option's text becomes a value: each a (flag, text) -> value ----------------------


def as_given(flag: str, raw):
    return raw


def switch(flag: str, raw) -> bool:
    return bool(raw)


def true_false(flag: str, raw) -> bool:
    return raw == "true"


def whole(low: int | None = None, high: int | None = None):
    def parse(flag: str, raw) -> int:
        try:
            value = int(str(raw))
        except ValueError:
            raise GregorError(f"{flag} must be a whole number, got {raw!r}") from None
        if low is not None and value < low:
            raise GregorError(f"{flag} must be at least {low}, got {value}")
        if high is not None and value > high:
            raise GregorError(f"{flag} must be at most {high}, got {value}")
        return value

    return parse


def positive(flag: str, raw) -> float:
    try:
        value = float(str(raw))
    except ValueError:
        raise GregorError(f"{flag} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise GregorError(f"{flag} must be a positive number, got {raw!r}")
    return value


def pairs(refused: Callable[[], dict]):
    """KEY=VALUE items of a repeatable option, each checked; `refused` names the keys
    another flag sets (key -> that flag)."""

    def parse(flag: str, raw) -> dict[str, str]:
        found = {}
        for item in raw or []:
            key, sep, value = str(item).partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise GregorError(f"{flag} {item!r}: use KEY=VALUE, e.g. {flag} linger.ms=0")
            if key in refused():
                raise GregorError(f"{flag} {key}: set it with {refused()[key]} instead")
            found[key] = value
        return found

    return parse


def workload_name(flag: str, raw) -> str:
    if raw not in WORKLOADS:
        raise GregorError(f"unknown workload {raw!r}; choose one of " + ", ".join(WORKLOADS))
    return raw


def client_name(flag: str, raw) -> str:
    if raw not in CLIENTS:
        raise GregorError(f"unknown client {raw!r}; the clients are {', '.join(CLIENTS)}")
    return raw


def parse_acks(flag: str, raw) -> str:
    return "all" if raw == "-1" else raw


def fault_list(flag: str, raw) -> list[str]:
    """--nemesis: fault names, none for none (a list from the parser, or text)."""
    if raw is None:
        return []
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    faults = [str(i).strip() for i in items if str(i).strip()]
    return [] if faults in ([], ["none"]) else faults


def target_list(flag: str, raw) -> list[str]:
    if isinstance(raw, str):
        return [t.strip() for t in raw.split(",") if t.strip()]
    return list(raw)


def own_librdkafka_settings() -> dict:
    return {key: "the run's own flag" for key in OWN_SETTINGS}


def own_topic_settings() -> dict:
    """Topic configs a flag of the run sets: refused in --topic-config."""
    return {s.topic: s.option.flag for s in SETTINGS.values() if s.topic and s.topic != SPREAD and not s.at_creation}


# --- a value back as an option's data form (test.json "run") ---------------------------------


def as_data(value):
    if isinstance(value, dict):
        return [f"{key}={item}" for key, item in value.items()]
    return value


def true_false_text(value: bool) -> str:
    return "true" if value else "false"


def comma_list(value):
    return None if value is None else ",".join(value)


def system_settings(options: dict) -> dict:
    """System options by their option's name; `hosts` follows from the backend, so it is left out."""
    names = {option.dest: option.name for option in SYSTEM_OPTIONS}
    return {names[key]: value for key, value in options.items() if key in names}


# --- the declaration of one field ------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """How one field of RunConfig is read from the command line, and where its value goes."""

    options: tuple[Option, ...] = ()  # none: validate derives the value
    parse: Callable = as_given  # (flag, text) -> value; a bad text raises a one-line GregorError
    read: Callable | None = None  # (args) -> value, for a value of several options (or more than its text)
    unparse: Callable = as_data  # value -> its option's data form (test.json "run")
    as_options: Callable | None = None  # value -> {option name: data}, for a value of several options
    only_with: str | None = None  # read only when this field is set, else None
    workload: str | None = None  # away from its default with another workload: refused
    client: str | None = None  # its name in the clients' options
    record: str | None = None  # its name in test.json's "client"
    record_when: str = ALWAYS  # ALWAYS, AWAY, or the field that must be set
    record_as: Callable | None = None  # (config, value) -> what the clients do with it, as recorded
    topic: str | None = None  # its name among the topics' settings (test.json's "broker"), or SPREAD
    at_creation: bool = False  # given to create_topic itself rather than as a topic config

    @property
    def option(self) -> Option:
        (only,) = self.options
        return only

    def value_from(self, args):
        """The field's value from parsed arguments (None where the option is unset and has no default)."""
        if self.read is not None:
            return self.read(args)
        option = self.option
        raw = getattr(args, option.dest, option.default)
        if raw is None and option.default is None:
            return None
        return self.parse(option.flag, raw)

    @property
    def default_value(self):
        option = self.option
        return None if option.default is None else self.parse(option.flag, option.default)

    def data(self, value) -> dict:
        """The field's value as options by name."""
        if self.as_options is not None:
            return self.as_options(value)
        if not self.options:
            return {}
        return {self.option.name: self.unparse(value)}


def declared(*options: Option, **setting) -> Field:
    return field(metadata={"setting": Setting(options, **setting)})


def option(
    flag: str,
    help: str,
    default=None,
    *,
    kind: str = VALUE,
    choices: tuple | None = None,
    metavar: str | None = None,
    required: bool = False,
    **setting,
) -> Field:
    """A field read from an option of its own, declared here."""
    return declared(Option(flag, help, default, kind, choices, metavar, required=required), **setting)


def derived(**setting) -> Field:
    """A field validate settles from others."""
    return declared(**setting)


def _lab(args) -> str:
    from harness.lab import lab_name

    return lab_name(getattr(args, "lab", None), getattr(args, "backend", "local"))


def _recorded_acks(config: RunConfig, value: str) -> str:
    return "all" if config.transactional else value


def _recorded_idempotence(config: RunConfig, value: bool) -> bool:
    return value or config.transactional


def _recorded_subscribe(config: RunConfig, value: bool) -> bool:
    return value or config.workload in ("group", "eos")


NEMESIS, NEMESIS_INTERVAL, NEMESIS_TARGETS, NEMESIS_SHAPE, NEMESIS_HOLD, WIRE_RULE = NEMESIS_OPTIONS
KEY_VALUE = "KEY=VALUE"


@dataclass(frozen=True)
class RunConfig:
    """One run's every setting, checked (run_cli.validate makes it). The order of the
    fields is the order of `gregor run --help` and of test.json's "client" and "broker"."""

    workload: str = option("--workload", "|".join(WORKLOADS), required=True, parse=workload_name)
    time_limit: float = option("--time-limit", "seconds of main phase (default 30)", "30", parse=positive)
    concurrency: int = option("--concurrency", "number of client processes (default 4)", "4", parse=whole(1, 256))
    rate: float = option("--rate", "ops per second over all paced clients (default 200)", "200", parse=positive)
    seed: int = option("--seed", "seed of every generator (default 0)", "0", parse=whole())
    keys: int = option("--keys", "number of keys (partitions) written (default 8)", "8", parse=whole(1))
    partitions_per_topic: int = option(
        "--partitions-per-topic", "partitions per topic (default 4)", "4", parse=whole(1, 1000)
    )
    topics: int | None = option("--topics", "number of topics (default: as many as the keys need)", parse=whole(1))
    nodes: int = option("--nodes", "brokers in the lab (default 3)", "3", parse=whole(1, 9))
    # the lab and what it runs (lab_options.py)
    lab: str = declared(LAB, read=_lab)
    backend: str = declared(BACKEND)
    system: str = declared(SYSTEM)
    version: str | None = declared(VERSION)
    backend_options: dict = declared(*SSH_OPTIONS, read=backend_options, as_options=recorded_backend_settings)
    system_options: dict = declared(*SYSTEM_OPTIONS, read=system_options, as_options=system_settings)
    # values may be credentials: never recorded
    client_config: dict = declared(CLIENT_CONFIG, read=client_config, as_options=lambda value: {})
    store: str = option("--store", "store directory (default ./store)", "store")
    name: str = option("--name", "test name (default kafka-<workload>)")
    drain_time_limit: float = option("--drain-time-limit", "seconds the final drain may take", "60", parse=positive)
    # the clients
    client: str = option(
        "--client",
        "the Kafka client library of every client: librdkafka (default, through confluent-kafka) or "
        "java (Kafka's own Java client, org.apache.kafka:kafka-clients; docs/CLIENTS.md)",
        LIBRDKAFKA,
        metavar="|".join(CLIENTS),
        parse=client_name,
        client="library",
        record="library",
    )
    client_version: str | None = option(
        "--client-version",
        "the Java client's version (default: the newest on Maven Central, built on first use); "
        "librdkafka's is the installed confluent-kafka's",
        metavar="V",
        client="library.version",
        record="library.version",
    )
    acks: str = option(
        "--acks",
        "acks of every producer: all (the same as -1), 1 or 0 (default all)",
        "all",
        choices=("all", "1", "0", "-1"),
        parse=parse_acks,
        client="acks",
        record="acks",
        record_as=_recorded_acks,
    )
    idempotence: bool = option(
        "--idempotence",
        "enable.idempotence of every producer (default true)",
        "true",
        choices=("true", "false"),
        parse=true_false,
        unparse=true_false_text,
        client="enable.idempotence",
        record="enable.idempotence",
        record_as=_recorded_idempotence,
    )
    isolation: str = option(
        "--isolation",
        "isolation.level of every consumer (default read_committed)",
        "read_committed",
        choices=("read_committed", "read_uncommitted"),
        client="isolation.level",
        record="isolation.level",
    )
    transactional: bool = derived(record="transactional")
    auto_commit: bool = option(
        "--auto-commit",
        "consumers auto-commit (group workload)",
        False,
        kind=SWITCH,
        parse=switch,
        client="auto.commit",
        record="auto.commit",
    )
    subscribe: bool = option(
        "--subscribe",
        "consumers poll through a consumer group",
        False,
        kind=SWITCH,
        parse=switch,
        client="subscribe",
        record="subscribe",
        record_as=_recorded_subscribe,
    )
    max_in_flight: int = option(
        "--max-in-flight",
        "max.in.flight.requests.per.connection of every producer (default 5)",
        "5",
        parse=whole(1, 1000),
        client="max.in.flight",
        record="max.in.flight.requests.per.connection",
    )
    retries: int | None = option(
        "--retries",
        "retries of every producer (default: librdkafka's own)",
        parse=whole(0),
        client="retries",
        record="retries",
    )
    batch: int = option(
        "--batch", "sends per producer op (default 1)", "1", parse=whole(1, 10000), client="batch", record="batch"
    )
    transaction_timeout_ms: int = option(
        "--transaction-timeout-ms",
        "transaction.timeout.ms of every transactional producer (default 10000)",
        "10000",
        parse=whole(1000),
        client="transaction.timeout.ms",
        record="transaction.timeout.ms",
    )
    producer_config: dict = option(
        "--producer-config",
        "another librdkafka setting of every producer, e.g. batch.num.messages=1 (repeatable)",
        (),
        kind=REPEAT,
        metavar=KEY_VALUE,
        parse=pairs(own_librdkafka_settings),
        client="producer_config",
        record="producer_config",
        record_when=AWAY,
    )
    consumer_config: dict = option(
        "--consumer-config",
        "another librdkafka setting of every consumer, e.g. auto.commit.interval.ms=5000 (repeatable)",
        (),
        kind=REPEAT,
        metavar=KEY_VALUE,
        parse=pairs(own_librdkafka_settings),
        client="consumer_config",
        record="consumer_config",
        record_when=AWAY,
    )
    process_ms: int = option(
        "--process-ms",
        "consumers spend this long processing what a poll returned before the op completes "
        "(default 0); an auto commit can land meanwhile. eos copiers spend it between their "
        "two commits (outputs and input offsets), the window client:copier:window aims at",
        "0",
        parse=whole(0, 600000),
        client="process.ms",
        record="process.ms",
        record_when=AWAY,
    )
    resend: bool = option(
        "--resend",
        "a client that replaces a killed one (or a zombie's partner) first sends again what "
        "the old one had in flight, as an application retrying its unsure writes does",
        False,
        kind=SWITCH,
        parse=switch,
        record="resend",
        record_when=AWAY,
    )
    zombie_kind: str = option(
        "--zombie-kind",
        "zombie workload: instances share a transactional.id (default) or are plain "
        "idempotent producers, which nothing fences",
        "transactional",
        choices=("transactional", "idempotent"),
        workload="zombie",
        client="zombie.kind",
        record="zombie.kind",
        record_when=AWAY,
    )
    copier_offsets: str = option(
        "--copier-offsets",
        "eos workload: copiers commit their input offsets in the transaction (default), or "
        "outside it, after producing or before processing",
        "txn",
        choices=("txn", "after", "before"),
        workload="eos",
        client="copier.offsets",
        record="copier.offsets",
        record_when=AWAY,
    )
    script: str | None = option(
        "--script",
        "script workload: the fixed steps its one producer runs, in step with wire faults "
        "(workloads/script.py; docs/SCENARIOS.md, Reproductions)",
        choices=tuple(SCRIPTS),
        workload="script",
        client="script",
        record="script",
        record_when=AWAY,
    )
    hang: str | None = option(
        "--hang",
        "txn workload: now and then pause a transactional client inside a transaction, or "
        "between two, for --hang-s seconds",
        choices=("inside", "between"),
        workload="txn",
        record="hang",
        record_when=AWAY,
    )
    txn_hold_ms: int = option(
        "--txn-hold-ms",
        "txn workload: time between a transaction's acknowledged writes and its commit "
        "(default 0; --hang inside pauses a client then)",
        "0",
        parse=whole(0, 600000),
        client="txn.hold.ms",
        record="txn.hold.ms",
        record_when=AWAY,
    )
    hang_s: float = option(
        "--hang-s",
        "how long a --hang lasts (default: transaction timeout + 5 s)",
        parse=positive,
        record="hang.s",
        record_when="hang",
    )
    # the topics
    min_insync: int = option(
        "--min-insync-replicas", "default: min(2, replication factor)", parse=whole(1), topic="min.insync.replicas"
    )
    unclean_election: bool = option(
        "--unclean-leader-election",
        "topic setting unclean.leader.election.enable (default false)",
        "false",
        choices=("true", "false"),
        parse=true_false,
        unparse=true_false_text,
        topic="unclean.leader.election.enable",
    )
    replication_factor: int = option(
        "--replication-factor", "default: min(3, nodes)", parse=whole(1), topic="replication.factor", at_creation=True
    )
    topic_config: dict = option(
        "--topic-config",
        "another setting of the run's topics, e.g. flush.messages=1 (repeatable)",
        (),
        kind=REPEAT,
        metavar=KEY_VALUE,
        parse=pairs(own_topic_settings),
        topic=SPREAD,
    )
    client_netns: bool = option(
        "--client-netns", "start each client in a network namespace of its own", False, kind=SWITCH, parse=switch
    )
    storage: str = option(
        "--data-on",
        "where a new lab keeps the brokers' data (default: powerfs when --nemesis has power-loss, else disk)",
        choices=("disk", "powerfs"),
    )
    check: bool = option(
        "--no-check",
        "skip the checker and the report",
        False,
        kind=SWITCH,
        parse=lambda flag, raw: not raw,
        unparse=lambda value: not value,
    )
    # the nemesis (nemesis/options.py)
    nemesis: list = declared(NEMESIS, parse=fault_list, unparse=lambda value: ",".join(value) or "none")
    nemesis_interval: float | None = declared(NEMESIS_INTERVAL, parse=positive, only_with="nemesis")
    nemesis_targets: list | None = declared(NEMESIS_TARGETS, parse=target_list, unparse=comma_list)
    nemesis_shape: str | None = declared(NEMESIS_SHAPE)
    nemesis_hold: float | None = declared(NEMESIS_HOLD)
    wire_rule: list = declared(WIRE_RULE, parse=lambda flag, raw: [str(rule).strip() for rule in raw or []])

    def client_options(self) -> dict:
        """ClientSpec.options: each setting the clients read, under the name they read it by."""
        return {s.client: _copied(getattr(self, name)) for name, s in SETTINGS.items() if s.client}

    def client_record(self) -> dict:
        """test.json's "client": what the clients do (docs/HISTORY.md)."""
        found = {}
        for name, s in SETTINGS.items():
            value = getattr(self, name)
            if not s.record or (s.record_when == AWAY and value == s.default_value):
                continue
            if s.record_when not in (ALWAYS, AWAY) and not getattr(self, s.record_when):
                continue
            found[s.record] = s.record_as(self, value) if s.record_as else value
        return found

    def topic_settings(self) -> dict:
        """test.json's "broker": the settings of the run's topics, the replication factor among them."""
        found = {}
        for name, s in SETTINGS.items():
            if s.topic == SPREAD:
                found.update(getattr(self, name))
            elif s.topic:
                found[s.topic] = getattr(self, name)
        return found

    def topic_configs(self) -> dict[str, str]:
        """The topic configs each topic is created with (the replication factor is create_topic's own)."""
        found = {}
        for name, s in SETTINGS.items():
            value = getattr(self, name)
            if s.topic == SPREAD:
                found.update(value)
            elif s.topic and not s.at_creation:
                found[s.topic] = str(value).lower() if isinstance(value, bool) else str(value)
        return found

    def as_options(self) -> dict:
        """test.json's "run": every option of the run by name, as settled (defaults filled in,
        derived values resolved; --client-config and --ssh-key left out, see their fields).
        options_to_argv turns it back into `gregor run` arguments that give this configuration
        (with the default key)."""
        found = {}
        for name, s in SETTINGS.items():
            found.update(s.data(getattr(self, name)))
        return found


def _copied(value):
    return dict(value) if isinstance(value, dict) else value


SETTINGS: dict[str, Setting] = {f.name: f.metadata["setting"] for f in fields(RunConfig)}
OPTIONS: tuple[Option, ...] = tuple(option for s in SETTINGS.values() for option in s.options)
# the client library and its version, which `gregor demo` and `gregor scenarios` pass on to their runs
CLIENT_OPTIONS: tuple[Option, ...] = (SETTINGS["client"].option, SETTINGS["client_version"].option)


def options_to_argv(settings: dict) -> list[str]:
    """`gregor run` arguments from options by name ({"acks": "1", "client-netns": True,
    "topic-config": ["a=b"]}), each written by its declared shape."""
    return to_argv(OPTIONS, settings)
