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
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from xml.etree import ElementTree

from ground.atomic import write_atomic
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
CENTRAL = "https://repo1.maven.org/maven2"
METADATA_PATH = "org/apache/kafka/kafka_2.13/maven-metadata.xml"
METADATA_MAX_AGE_S = 24 * 3600

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


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def repository() -> str:
    """Maven Central, or the mirror that $GREGOR_MAVEN_SETTINGS names (the
    same one Maven itself is told to use)."""
    settings = os.environ.get("GREGOR_MAVEN_SETTINGS")
    if settings and os.path.isfile(settings):
        try:
            mirror = ElementTree.parse(settings).getroot().find(".//mirror/url")
        except ElementTree.ParseError:
            mirror = None
        if mirror is not None and (mirror.text or "").strip():
            return mirror.text.strip().rstrip("/")
    return CENTRAL


def parse_metadata(xml: str) -> list[str]:
    """Release versions (x.y.z) that Gregor can run, oldest first."""
    found = [v.text.strip() for v in ElementTree.fromstring(xml).iter("version") if v.text]
    releases = [v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v) and _key(v) >= OLDEST]
    return sorted(set(releases), key=_key)


def maven_versions(refresh: bool = False) -> list[str]:
    """The Kafka versions on Maven Central, asked at most once a day (cached
    in ~/.cache/gregor/kafka/maven-metadata.xml; the cache serves when the
    network does not)."""
    cached = cache_root() / "maven-metadata.xml"
    fresh = cached.is_file() and time.time() - cached.stat().st_mtime < METADATA_MAX_AGE_S
    if fresh and not refresh:
        return parse_metadata(cached.read_text())
    url = f"{repository()}/{METADATA_PATH}"
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:
            xml = answer.read().decode()
        versions = parse_metadata(xml)
    except (OSError, ValueError, ElementTree.ParseError) as error:
        if cached.is_file():
            return parse_metadata(cached.read_text())
        raise GregorError(
            f"Maven Central is unreachable (cannot read Kafka's version list at {url}: "
            f"{getattr(error, 'reason', error)}); check the network or proxy and retry"
        ) from None
    write_atomic(cached, xml)
    return versions


def newest(versions: list[str], count: int = 5) -> str:
    return ", ".join(reversed(versions[-count:]))


def check_version(version: str) -> str:
    """An installed version, or one Maven Central has: else one line naming the newest."""
    if installed(version) is not None:
        return version
    if not re.fullmatch(r"\d+\.\d+\.\d+", str(version)):
        raise GregorError(f"unknown Kafka version {version!r}; give x.y.z, e.g. {DEFAULT_VERSION}")
    versions = maven_versions()
    if version in versions:
        return version
    if _key(version) < OLDEST:
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


def _pom(version: str) -> str:
    """A throwaway pom whose only job is to name what Maven must fetch."""
    if int(version.split(".")[0]) >= 4:
        log4j = "2.24.3"
        binding = f"""
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{log4j}</version></dependency>"""
    else:
        binding = """
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>"""
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>gregor</groupId><artifactId>kafka-{version}</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{version}</version></dependency>{binding}
  </dependencies>
</project>
"""


def _unreachable(output: str) -> bool:
    markers = (
        "Could not transfer",
        "UnknownHost",
        "Connection refused",
        "connect timed out",
        "Network is unreachable",
        "No route to host",
        "Connect to ",
        "Read timed out",
    )
    return any(marker in output for marker in markers)


def install(version: str | None = None, progress: Callable[[str], None] = print, mvn: str = "mvn") -> KafkaInstall:
    """Installs `version` (default: DEFAULT_VERSION) unless it is cached."""
    version = check_version(version or DEFAULT_VERSION)
    found = installed(version)
    if found is not None:
        progress(f"Kafka {version} already installed in {found.home}")
        return found
    if shutil.which(mvn) is None:
        raise GregorError("Maven ('mvn') not found; install it: apt-get install maven")
    home = cache_root() / version
    # Our own scratch dir, so two installs at once (setup and a test) never mix files.
    work = home.with_name(f".{version}.partial.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    (work / "libs").mkdir(parents=True)
    (work / "pom.xml").write_text(_pom(version))
    progress(f"fetching org.apache.kafka:kafka_2.13:{version} and its runtime dependencies from Maven Central")
    # GREGOR_MAVEN_SETTINGS: a settings.xml for a mirror or proxy (also used by the tests).
    settings = os.environ.get("GREGOR_MAVEN_SETTINGS")
    result = subprocess.run(
        [
            mvn,
            "-B",
            "-ntp",
            "-Dstyle.color=never",
            *(["-s", settings] if settings else []),
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={work / 'libs'}",
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        output = result.stdout + result.stderr
        shutil.rmtree(work, ignore_errors=True)
        if _unreachable(output):
            raise GregorError(
                "Maven Central is unreachable (Maven could not download Kafka); "
                "check the network or proxy settings in ~/.m2/settings.xml and retry"
            )
        last = next((line for line in output.splitlines() if "[ERROR]" in line), output.strip()[-300:])
        raise GregorError(f"Maven failed to fetch Kafka {version}: {last.strip()}")
    (work / "log4j.properties").write_text(_LOG4J1)
    (work / "log4j2.properties").write_text(_LOG4J2)
    (work / STAMP).write_text(version + "\n")
    if installed(version) is not None:  # another process finished first
        shutil.rmtree(work, ignore_errors=True)
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
    return KafkaInstall(version, home)
