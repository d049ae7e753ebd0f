"""Installs Apache Kafka from Maven Central, cached per version.

Maven resolves `org.apache.kafka:kafka_2.13` and its runtime dependencies
(plus a logging binding, so that brokers write logs) into
``~/.cache/gregor/kafka/<version>/libs``. A finished install is marked by a
stamp file, so the second call for a version never runs Maven and works
offline.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ground import maven
from ground.errors import GregorError
from ground.paths import cache_dir

# 3.9.1 is the default: the last 3.x line (KRaft production-ready, ZooKeeper
# still optional), the version the seed histories in docs/HISTORY.md were taken
# on, and it runs on the Java 17 Debian 12 ships. 4.x is one flag away.
DEFAULT_VERSION = "3.9.1"

# Which versions exist is Maven Central's answer (maven-metadata.xml of
# kafka_2.13), never a list of ours; Gregor runs those from 3.8.0 on (KRaft
# with its current storage format and config, no ZooKeeper).
OLDEST = (3, 8, 0)

STAMP = ".gregor-installed"

_LOG4J1 = """\
# Written by Gregor: every broker log line goes to stdout, which the lab
# redirects into the node's log file.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients.NetworkClient=WARN
"""

_LOG4J2 = """\
# Written by Gregor: every broker log line goes to stdout, which the lab
# redirects into the node's log file.
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


@dataclass(frozen=True)
class KafkaInstall:
    """Where one installed version lives."""

    version: str
    home: Path

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def tools(self) -> Path:
        """kafka-tools, where the version needs it (ensure_tools); never on the brokers' class path."""
        return self.home / "tools"

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @property
    def is_4x(self) -> bool:
        return is_4x(self.version)


def is_4x(version: str) -> bool:
    """4.x logs through log4j2 and has no ZooKeeper at all."""
    return int(version.split(".")[0]) >= 4


def cache_root() -> Path:
    return cache_dir() / "kafka"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def repository() -> str:
    """Maven Central, or the mirror that $GREGOR_MAVEN_SETTINGS names."""
    return maven.repository()


def parse_metadata(xml: str) -> list[str]:
    """Release versions (x.y.z) that Gregor can run, oldest first."""
    return maven.parse_releases(xml, OLDEST)


def maven_versions(refresh: bool = False) -> list[str]:
    """The Kafka versions on Maven Central, asked at most once a day (cached
    in ~/.cache/gregor/kafka/maven-metadata.xml; the cache serves when the
    network does not)."""
    return maven.release_versions(
        "org.apache.kafka:kafka_2.13", cache_root() / "maven-metadata.xml", OLDEST, base=repository(), refresh=refresh
    )


def newest(versions: list[str], count: int = 5) -> str:
    return maven.newest(versions, count)


def check_version(version: str) -> str:
    """An installed version, or one Maven Central has: else one line naming the newest."""
    if installed(version) is not None:
        return version
    if not re.fullmatch(r"\d+\.\d+\.\d+", str(version)):
        raise GregorError(f"unknown Kafka version {version!r}; give x.y.z, e.g. {DEFAULT_VERSION}")
    versions = maven_versions()
    if version in versions:
        return version
    if version_key(version) < OLDEST:
        raise GregorError(
            f"Kafka {version} is older than the {'.'.join(map(str, OLDEST))} Gregor runs "
            f"(KRaft only); newest on Maven Central: {newest(versions)}"
        )
    raise GregorError(f"unknown Kafka version {version!r}: Maven Central does not have it; newest: {newest(versions)}")


def installed(version: str) -> KafkaInstall | None:
    """The install of `version` if it is complete, else None (no network)."""
    home = cache_root() / version
    if (home / STAMP).is_file():
        return KafkaInstall(version, home)
    return None


def require_installed(version: str) -> KafkaInstall:
    found = installed(version)
    if found is None:
        raise GregorError(f"Kafka {version} is not installed; run: gregor kafka install --version {version}")
    return found


def _coordinates(version: str) -> list[str]:
    """What Maven must fetch: the broker and a logging binding, so that brokers write logs."""
    if is_4x(version):
        log4j = "2.24.3"
        binding = [
            f"org.apache.logging.log4j:log4j-slf4j-impl:{log4j}",
            f"org.apache.logging.log4j:log4j-core:{log4j}",
        ]
    else:
        binding = ["org.slf4j:slf4j-reload4j:1.7.36"]
    return [f"org.apache.kafka:kafka_2.13:{version}", *binding]


# DumpLogSegments (which decodes the transaction log, harness/systems/kafka/txn_log.py)
# is kafka.tools.DumpLogSegments in kafka_2.13 up to 4.2.x, and
# org.apache.kafka.tools.DumpLogSegments in the kafka-tools jar from 4.3.0 on.
TOOLS_FROM = (4, 3, 0)


def needs_tools(version: str) -> bool:
    return version_key(version) >= TOOLS_FROM


def dump_log_segments(version: str) -> str:
    """The class of Kafka's DumpLogSegments in this version."""
    return "org.apache.kafka.tools.DumpLogSegments" if needs_tools(version) else "kafka.tools.DumpLogSegments"


def ensure_tools(kafka: KafkaInstall, progress: Callable[[str], None] = print) -> bool:
    """The kafka-tools jar beside the libs (not on the brokers' class path) where the
    version keeps DumpLogSegments there; True when it is there (or not needed). Its
    dependencies are the broker's own jars, so the one jar is fetched alone."""
    if not needs_tools(kafka.version) or list(kafka.tools.glob("kafka-tools-*.jar")):
        return True
    progress(f"fetching org.apache.kafka:kafka-tools:{kafka.version} (DumpLogSegments) from Maven Central")
    partial = kafka.home / f".tools.partial.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        maven.fetch_jars(
            [f"org.apache.kafka:kafka-tools:{kafka.version}"], partial, f"kafka-tools {kafka.version}", transitive=False
        )
    except GregorError as error:
        shutil.rmtree(partial, ignore_errors=True)
        progress(f"no kafka-tools {kafka.version} ({error}): the transaction log cannot be decoded")
        return False
    try:
        partial.rename(kafka.tools)
    except OSError:  # another process put it there first
        shutil.rmtree(partial, ignore_errors=True)
    return True


def install(version: str | None = None, progress: Callable[[str], None] = print, mvn: str = "mvn") -> KafkaInstall:
    """Installs `version` (default: DEFAULT_VERSION) unless it is cached."""
    version = check_version(version or DEFAULT_VERSION)
    found = installed(version)
    if found is not None:
        progress(f"Kafka {version} already installed in {found.home}")
        ensure_tools(found, progress)
        return found
    home = cache_root() / version
    # Our own scratch dir, so two installs at once (setup and a test) never mix files.
    work = home.with_name(f".{version}.partial.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    progress(f"fetching org.apache.kafka:kafka_2.13:{version} and its runtime dependencies from Maven Central")
    try:
        maven.fetch_jars(_coordinates(version), work / "libs", f"Kafka {version}", mvn=mvn)
    except GregorError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    (work / "log4j.properties").write_text(_LOG4J1)
    (work / "log4j2.properties").write_text(_LOG4J2)
    (work / STAMP).write_text(version + "\n")
    if installed(version) is not None:  # another process finished first
        shutil.rmtree(work, ignore_errors=True)
        ensure_tools(KafkaInstall(version, home), progress)
        return KafkaInstall(version, home)
    shutil.rmtree(home, ignore_errors=True)  # an unfinished install without its stamp
    try:
        work.rename(home)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
        if installed(version) is None:
            raise GregorError(f"could not move Kafka {version} into {home}; remove it and retry") from None
    jars = len(list((home / "libs").glob("*.jar")))
    progress(f"Kafka {version} installed: {jars} jars in {home / 'libs'}")
    kafka = KafkaInstall(version, home)
    ensure_tools(kafka, progress)
    return kafka
