"""librdkafka settings -> Kafka Java client settings: the one table of the Java path.

Gregor's workloads (workloads/kafka_io.py), --producer-config/--consumer-config,
--client-config and the catalogue speak librdkafka's names. Each name here maps
to its Java name (with the value converted where the units or spellings
differ), or is handled by the facade itself (callbacks, statistics, auto
commit), or is refused with one line: a setting that silently did nothing
would make two runs look comparable when they are not. docs/CLIENTS.md
prints the table (tables.py).

Java defaults that differ from librdkafka's where Gregor sets nothing are set
to librdkafka's here (DEFAULTS), so that an unset option means the same on
both clients.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

from ground.errors import GregorError

PRODUCER = "producer"
CONSUMER = "consumer"
BOTH = (PRODUCER, CONSUMER)


class JavaConfigError(GregorError):
    """A librdkafka setting the Java client cannot honour; the message is one line."""


@dataclass
class Settings:
    """What a facade object needs: the Java properties and what the facade does itself."""

    java: dict[str, str] = field(default_factory=dict)
    stats_ms: int = 0  # statistics.interval.ms (producer "eos" statistics, emulated)
    auto_commit: bool = False  # enable.auto.commit, emulated (on_commit must see each commit)
    auto_commit_ms: int = 5000
    callbacks: dict = field(default_factory=dict)


def _bool(value) -> str:
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0"):
        raise ValueError(f"expected true or false, got {value!r}")
    return "true" if text in ("true", "1") else "false"


def _text(value) -> str:
    return str(value)


def _whole(value) -> str:
    return str(int(str(value).strip()))


def _acks(value) -> str:
    text = str(value).strip().lower()
    return "all" if text in ("all", "-1") else text


def _offset_reset(value) -> str:
    spelled = {
        "smallest": "earliest",
        "earliest": "earliest",
        "beginning": "earliest",
        "largest": "latest",
        "latest": "latest",
        "end": "latest",
        "error": "none",
    }
    text = str(value).strip().lower()
    if text not in spelled:
        raise JavaConfigError(f"auto.offset.reset {value!r}: use earliest, latest or error")
    return spelled[text]


ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def _assignors(value) -> str:
    names = [part.strip() for part in str(value).split(",") if part.strip()]
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise JavaConfigError(f"partition.assignment.strategy {value!r}: use {', '.join(ASSIGNORS)}")
    return ",".join(ASSIGNORS[n] for n in names)


def _compression(value) -> str:
    text = str(value).strip().lower()
    if text not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise JavaConfigError(f"compression {value!r}: the Java client has none, gzip, snappy, lz4, zstd")
    return text


@dataclass(frozen=True)
class Rule:
    java: str | None  # the Java name; None: handled by the facade or refused
    roles: tuple = BOTH
    convert: Callable = _text
    why: str = ""  # for the README table, and the refusal line when java is None and not facade-owned


SAME = "same name, same meaning"
RULES: dict[str, Rule] = {
    # -- connection (both)
    "bootstrap.servers": Rule("bootstrap.servers", why=SAME),
    "metadata.broker.list": Rule("bootstrap.servers", why="librdkafka's alias of bootstrap.servers"),
    "client.id": Rule("client.id", why=SAME),
    "reconnect.backoff.ms": Rule("reconnect.backoff.ms", why=SAME),
    "reconnect.backoff.max.ms": Rule("reconnect.backoff.max.ms", why=SAME),
    "connections.max.idle.ms": Rule("connections.max.idle.ms", why=SAME),
    "metadata.max.age.ms": Rule("metadata.max.age.ms", why=SAME),
    "socket.send.buffer.bytes": Rule(
        "send.buffer.bytes",
        convert=lambda v: str(int(v) or -1),
        why="same meaning, Java's name; librdkafka's 0 (the OS's) is Java's -1",
    ),
    "socket.receive.buffer.bytes": Rule(
        "receive.buffer.bytes",
        convert=lambda v: str(int(v) or -1),
        why="same meaning, Java's name; librdkafka's 0 (the OS's) is Java's -1",
    ),
    "retry.backoff.ms": Rule("retry.backoff.ms", why=SAME),
    "retry.backoff.max.ms": Rule("retry.backoff.max.ms", why="same meaning (Java 3.7+)"),
    "client.rack": Rule("client.rack", why=SAME),
    # security (--client-config)
    "security.protocol": Rule("security.protocol", convert=lambda v: str(v).upper(), why=SAME),
    "sasl.mechanism": Rule("sasl.mechanism", convert=lambda v: str(v).upper(), why=SAME),
    "sasl.mechanisms": Rule("sasl.mechanism", convert=lambda v: str(v).upper(), why="librdkafka's alias"),
    "sasl.username": Rule(None, why="folded with sasl.password into sasl.jaas.config (PLAIN, SCRAM)"),
    "sasl.password": Rule(None, why="folded with sasl.username into sasl.jaas.config (PLAIN, SCRAM)"),
    "ssl.ca.location": Rule("ssl.truststore.location", why="a PEM file: ssl.truststore.type=PEM is set with it"),
    "ssl.endpoint.identification.algorithm": Rule(
        "ssl.endpoint.identification.algorithm",
        convert=lambda v: "" if str(v).lower() == "none" else str(v),
        why="same; librdkafka's 'none' is Java's empty value",
    ),
    # -- producer
    "acks": Rule("acks", (PRODUCER,), _acks, "same; -1 is all"),
    "request.required.acks": Rule("acks", (PRODUCER,), _acks, "librdkafka's alias of acks"),
    "enable.idempotence": Rule("enable.idempotence", (PRODUCER,), _bool, SAME),
    "max.in.flight.requests.per.connection": Rule("max.in.flight.requests.per.connection", (PRODUCER,), why=SAME),
    "max.in.flight": Rule("max.in.flight.requests.per.connection", (PRODUCER,), why="librdkafka's alias"),
    "message.timeout.ms": Rule(
        "delivery.timeout.ms", (PRODUCER,), why="the time a record may take from produce() to its report"
    ),
    "delivery.timeout.ms": Rule("delivery.timeout.ms", (PRODUCER,), why="librdkafka's alias of message.timeout.ms"),
    "request.timeout.ms": Rule(
        None,
        (PRODUCER,),
        why="librdkafka: the broker's ack timeout; Java's request.timeout.ms is that and the client's wait "
        "for a response at once (socket.timeout.ms in librdkafka): Java gets the smaller of the two",
    ),
    "linger.ms": Rule("linger.ms", (PRODUCER,), why=SAME),
    "queue.buffering.max.ms": Rule("linger.ms", (PRODUCER,), why="librdkafka's alias of linger.ms"),
    "retries": Rule("retries", (PRODUCER,), why=SAME),
    "message.send.max.retries": Rule("retries", (PRODUCER,), why="librdkafka's alias of retries"),
    "transactional.id": Rule("transactional.id", (PRODUCER,), why=SAME),
    "transaction.timeout.ms": Rule("transaction.timeout.ms", (PRODUCER,), why=SAME),
    "batch.size": Rule("batch.size", (PRODUCER,), why="same: bytes per partition batch"),
    "batch.num.messages": Rule(
        None,
        (PRODUCER,),
        why="Java batches by bytes only; batch.num.messages=1 (one record per batch, the catalogue's "
        "setting) becomes batch.size=0, any other value is refused",
    ),
    "compression.type": Rule("compression.type", (PRODUCER,), _compression, SAME),
    "compression.codec": Rule("compression.type", (PRODUCER,), _compression, "librdkafka's alias"),
    "queue.buffering.max.kbytes": Rule(
        "buffer.memory", (PRODUCER,), lambda v: str(int(v) * 1024), "the client's record buffer, in bytes"
    ),
    "message.max.bytes": Rule("max.request.size", (PRODUCER,), why="the largest request the client builds"),
    "statistics.interval.ms": Rule(
        None, (PRODUCER,), why="the facade emits librdkafka-shaped statistics ('eos' only) from the driver"
    ),
    # -- consumer
    "group.id": Rule("group.id", (CONSUMER,), why=SAME),
    "group.instance.id": Rule("group.instance.id", (CONSUMER,), why=SAME),
    "group.protocol": Rule("group.protocol", (CONSUMER,), why=SAME),
    "enable.auto.commit": Rule(
        None,
        (CONSUMER,),
        why="the driver commits itself (commitAsync of the positions handed out, every interval and on "
        "revoke/close), since Java's own auto commit reports to no callback and on_commit must see each",
    ),
    "auto.commit.interval.ms": Rule(None, (CONSUMER,), why="the interval of the driver's auto commit"),
    "auto.offset.reset": Rule("auto.offset.reset", (CONSUMER,), _offset_reset, "same; smallest/largest/error"),
    "isolation.level": Rule("isolation.level", (CONSUMER,), why=SAME),
    "session.timeout.ms": Rule("session.timeout.ms", (CONSUMER,), why=SAME),
    "heartbeat.interval.ms": Rule("heartbeat.interval.ms", (CONSUMER,), why=SAME),
    "max.poll.interval.ms": Rule("max.poll.interval.ms", (CONSUMER,), why=SAME),
    "fetch.wait.max.ms": Rule("fetch.max.wait.ms", (CONSUMER,), why="same meaning, Java's name"),
    "fetch.min.bytes": Rule("fetch.min.bytes", (CONSUMER,), why=SAME),
    "fetch.max.bytes": Rule("fetch.max.bytes", (CONSUMER,), why=SAME),
    "max.partition.fetch.bytes": Rule("max.partition.fetch.bytes", (CONSUMER,), why=SAME),
    "fetch.message.max.bytes": Rule("max.partition.fetch.bytes", (CONSUMER,), why="librdkafka's alias"),
    "partition.assignment.strategy": Rule(
        "partition.assignment.strategy", (CONSUMER,), _assignors, "librdkafka's names -> Java's assignor classes"
    ),
    "check.crcs": Rule("check.crcs", (CONSUMER,), _bool, SAME),
    "socket.timeout.ms": Rule(
        None,
        BOTH,
        why="librdkafka's client-side wait for a response; Java's request.timeout.ms (a producer's gets the "
        "smaller of it and librdkafka's request.timeout.ms)",
    ),
    "enable.partition.eof": Rule(None, (CONSUMER,), why="false only: the Java client has no end-of-partition events"),
    "enable.auto.offset.store": Rule(
        None, (CONSUMER,), why="true only: Java has no offset store apart from the positions handed out"
    ),
}

# Java's numeric settings are checked here (Java would refuse them only when the client is built).
_NUMERIC = re.compile(r"(\.ms|\.bytes|\.size|^retries|\.per\.connection)$")
RULES = {
    key: replace(rule, convert=_whole) if rule.java and rule.convert is _text and _NUMERIC.search(rule.java) else rule
    for key, rule in RULES.items()
}

# Refused outright, with the reason (the others not in RULES get a generic line).
REFUSED = {
    "debug": "Java logs through SLF4J, and the driver ships no binding; drop debug",
    "enable.gapless.guarantee": "the Java idempotent producer has no gapless mode",
    "partitioner": "Gregor names the partition of every record",
    "queue.buffering.max.messages": "Java bounds its buffer in bytes (queue.buffering.max.kbytes)",
    "enable.ssl.certificate.verification": "the Java client cannot turn chain verification off",
    "ssl.certificate.location": "client certificates are not mapped yet (needs a PEM keystore)",
    "ssl.key.location": "client certificates are not mapped yet (needs a PEM keystore)",
    "topic.metadata.refresh.interval.ms": "Java refreshes metadata on errors and every metadata.max.age.ms",
    "api.version.request": "the Java client always negotiates API versions",
}

# Java defaults that differ from librdkafka's, for settings Gregor leaves unset.
DEFAULTS = {
    PRODUCER: {
        "max.block.ms": "10000",  # librdkafka's produce() never blocks; the workloads' calls wait 10 s
    },
    CONSUMER: {
        "enable.auto.commit": "false",  # the driver commits (enable.auto.commit above)
        "partition.assignment.strategy": _assignors("range,roundrobin"),  # librdkafka's default
        "allow.auto.create.topics": "false",  # librdkafka's consumer default
        "check.crcs": "false",  # librdkafka's default; Java's is true
    },
}

CALLBACKS = {
    PRODUCER: {"on_delivery", "stats_cb", "error_cb", "throttle_cb", "logger", "oauth_cb"},
    CONSUMER: {"on_commit", "stats_cb", "error_cb", "throttle_cb", "logger", "oauth_cb"},
}


def refusal(key: str, role: str) -> str:
    why = REFUSED.get(key) or "it has no counterpart in Kafka's Java client"
    return f"{role} setting {key!r} cannot be used with the Java client: {why}"


def _apply(out: Settings, rule: Rule, key: str, value, role: str, timeouts: dict, sasl: dict) -> None:
    """One librdkafka setting into `out` (timeouts and SASL credentials are gathered, then folded)."""
    if key in ("request.timeout.ms", "socket.timeout.ms"):
        timeouts[key] = int(value)
    elif key in ("sasl.username", "sasl.password"):
        sasl[key] = str(value)
    elif key == "batch.num.messages":
        if int(value) != 1:
            raise JavaConfigError(refusal(key, role) + f" (only batch.num.messages=1 maps; got {value})")
        out.java["batch.size"] = "0"
    elif key == "statistics.interval.ms":
        out.stats_ms = int(value)
    elif key == "enable.auto.commit":
        out.auto_commit = _bool(value) == "true"
    elif key == "auto.commit.interval.ms":
        out.auto_commit_ms = int(value)
    elif key == "enable.partition.eof":
        if _bool(value) == "true":
            raise JavaConfigError(refusal(key, role) + ": the Java client has no end-of-partition events")
    elif key == "enable.auto.offset.store":
        if _bool(value) == "false":
            raise JavaConfigError(refusal(key, role) + ": Java has no separate offset store")
    else:
        out.java[rule.java] = rule.convert(value)
        if key == "ssl.ca.location":
            out.java["ssl.truststore.type"] = "PEM"


def translate(conf: dict, role: str) -> Settings:
    """The Java settings for a librdkafka config dict; JavaConfigError names the first bad one."""
    out = Settings(java=dict(DEFAULTS[role]))
    timeouts = {}
    sasl = {}
    for key, value in conf.items():
        if callable(value) or key in CALLBACKS[role]:
            if key not in CALLBACKS[role]:
                raise JavaConfigError(f"{role} callback {key!r} is not offered by the Java facade")
            out.callbacks[key] = value
            continue
        rule = RULES.get(key)
        if rule is None or role not in rule.roles:
            if rule is not None:
                raise JavaConfigError(f"{key!r} is a {'/'.join(rule.roles)} setting, given to a {role}")
            raise JavaConfigError(refusal(key, role))
        try:
            _apply(out, rule, key, value, role, timeouts, sasl)
        except ValueError as error:
            raise JavaConfigError(f"{role} setting {key}={value!r}: {error}") from None
    if timeouts:
        out.java["request.timeout.ms"] = str(min(timeouts.values()))
    if sasl:
        out.java["sasl.jaas.config"] = _jaas(out.java.get("sasl.mechanism", "GSSAPI"), sasl)
    if out.stats_ms and "stats_cb" not in out.callbacks:
        out.stats_ms = 0  # nobody listens: librdkafka would emit into the void
    if role == CONSUMER and out.stats_ms:
        raise JavaConfigError("consumer statistics.interval.ms: the Java facade emulates producer statistics only")
    return out


def check_settings(producer: dict, consumer: dict, both: dict, why: str) -> None:
    """The user's librdkafka settings (--producer-config, --consumer-config, and the lab's
    --client-config for both), each translatable: else one line naming the first that is not."""
    for role, settings in ((PRODUCER, {**both, **producer}), (CONSUMER, {**both, **consumer})):
        try:
            translate(settings, role)
        except JavaConfigError as error:
            raise JavaConfigError(f"{why}: {error}") from None


def _jaas(mechanism: str, sasl: dict) -> str:
    modules = {
        "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    }
    if mechanism not in modules:
        raise JavaConfigError(f"sasl.username/sasl.password with sasl.mechanism {mechanism}: use PLAIN or SCRAM-SHA-*")

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    user, password = sasl.get("sasl.username", ""), sasl.get("sasl.password", "")
    return f"{modules[mechanism]} required username={quoted(user)} password={quoted(password)};"
