"""Kafka's Java client from Maven Central, Gregor's driver compiled against it, cached per version.

Maven resolves `org.apache.kafka:kafka-clients:<version>` and its runtime
dependencies into ~/.cache/gregor/java-client/<version>/libs (as
harness/systems/kafka/install.py fetches the brokers' jars); javac compiles
GregorKafkaDriver.java against them into driver-<source hash>/, and a
training run writes a class-data-sharing archive beside it, so that each
client JVM maps its classes instead of parsing jars. A finished step is
marked by its output, so the second call for a version runs neither Maven
nor javac and works offline. `gregor java install` and ./setup call install().
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ground import maven
from ground.errors import GregorError
from ground.paths import cache_dir

DRIVER_SOURCE = Path(__file__).resolve().parent / "GregorKafkaDriver.java"
DRIVER_CLASS = "GregorKafkaDriver"
DRIVER_JAR = "gregor-kafka-driver.jar"
COORDINATE = "org.apache.kafka:kafka-clients"
OLDEST = (3, 8, 0)  # the oldest client whose internals the driver reads (the producer id and epoch)
STAMP = ".gregor-installed"
# Driver builds kept per kafka-clients version, the most recently used first: checkouts of
# Gregor with different driver sources share the cache, and each removing every build but
# its own made them rebuild in turn (and took the jar from under a client still running).
KEPT_BUILDS = 4
LAST_USED = ".last-used"  # touched at each use (the jar itself keeps its time: the class-data archive checks it)
JDK_HINT = "apt-get install openjdk-17-jdk-headless maven"

# Small JVMs: 6 to 10 of them run beside 3 brokers on 2 cores (docs/CLIENTS.md: measurements).
JVM_OPTIONS = (
    "-Xms16m",
    "-Xmx128m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:-UsePerfData",
    "-XX:MaxMetaspaceSize=64m",
    "-XX:ReservedCodeCacheSize=24m",
    "-XX:ActiveProcessorCount=1",
)


@dataclass(frozen=True)
class JavaClient:
    """The compiled driver for one kafka-clients version."""

    version: str
    home: Path
    classes: Path
    archive: Path | None  # the class-data archive, when the training run wrote one

    @property
    def classpath(self) -> str:
        """The driver's jar, then the client's jars by name: explicit and stable, as
        class-data sharing wants the same path when the archive is written and used."""
        jars = sorted(str(j) for j in (self.home / "libs").glob("*.jar"))
        return ":".join([str(self.classes / DRIVER_JAR), *jars])

    def command(self, extra_jvm: tuple[str, ...] = (), tuned: bool = True) -> list[str]:
        """The argv that starts one driver JVM (tuned False: the JVM's defaults, only to measure)."""
        sharing = [f"-XX:SharedArchiveFile={self.archive}", "-Xshare:auto"] if self.archive and tuned else []
        options = list(JVM_OPTIONS) if tuned else []
        return [java(), *options, *sharing, *extra_jvm, "-cp", self.classpath, DRIVER_CLASS]


def cache_root() -> Path:
    return cache_dir() / "java-client"


def java() -> str:
    found = shutil.which("java")
    if not found:
        raise GregorError(f"--client java needs a JDK 17+ (java, javac) and Maven; install them: {JDK_HINT}")
    return found


def require_jdk() -> None:
    """What building and running the Java client needs on this host: one line naming what to install."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        raise GregorError(
            f"--client java needs a JDK 17+ (java, javac) and Maven, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not found; install them: {JDK_HINT}"
        )


def maven_versions(refresh: bool = False) -> list[str]:
    """kafka-clients releases Gregor can drive, oldest first (Maven Central, asked at most once a day)."""
    return maven.release_versions(COORDINATE, cache_root() / "maven-metadata.xml", OLDEST, refresh=refresh)


def installed_versions() -> list[str]:
    found = [p.name for p in cache_root().glob("*.*.*") if (p / STAMP).is_file()]
    return sorted(found, key=maven.version_key)


def resolve_version(version: str | None) -> str:
    """`version`, checked; None means the newest on Maven Central (offline: the newest installed)."""
    if version is None:
        try:
            return maven_versions()[-1]
        except GregorError:
            if installed_versions():
                return installed_versions()[-1]
            raise
    if version in installed_versions():
        return version
    versions = maven_versions()
    if version in versions:
        return version
    return _unknown(version, versions)


def _unknown(version: str, versions: list[str]):
    try:
        older = maven.version_key(version) < OLDEST
    except ValueError:
        older = False
    if older:
        raise GregorError(
            f"Kafka's Java client {version} is older than {'.'.join(map(str, OLDEST))}, the oldest Gregor "
            f"drives; newest on Maven Central: {maven.newest(versions)}"
        )
    raise GregorError(f"unknown Java client version {version!r}; newest on Maven Central: {maven.newest(versions)}")


def source_hash() -> str:
    return hashlib.sha256(DRIVER_SOURCE.read_bytes()).hexdigest()[:12]


def installed(version: str) -> JavaClient | None:
    """The compiled driver of `version` for this driver source, if built (no network, no javac)."""
    home = cache_root() / version
    classes = home / f"driver-{source_hash()}"
    if not (home / STAMP).is_file() or not (classes / DRIVER_JAR).is_file():
        return None
    _mark_used(classes)
    archive = classes / "driver.jsa"
    return JavaClient(version, home, classes, archive if archive.is_file() else None)


def _mark_used(classes: Path) -> None:
    try:
        (classes / LAST_USED).touch()
    except OSError:  # a read-only cache still serves; it is only pruned less well
        pass


def _last_used(classes: Path) -> float:
    for marker in (LAST_USED, DRIVER_JAR):
        try:
            return (classes / marker).stat().st_mtime
        except OSError:
            continue
    return 0.0


def prune_builds(home: Path, keep: Path) -> list[Path]:
    """Removes this version's driver builds beyond the KEPT_BUILDS most recently used, never
    `keep` (the one just built); returns what it removed."""
    others = sorted((p for p in home.glob("driver-*") if p != keep), key=_last_used, reverse=True)
    removed = others[KEPT_BUILDS - 1 :]
    for stale in removed:
        shutil.rmtree(stale, ignore_errors=True)
    return removed


def _fetch_jars(version: str, home: Path, progress) -> None:
    if (home / STAMP).is_file():
        return
    progress(f"fetching {COORDINATE}:{version} and its runtime dependencies from Maven Central")
    work = home.with_name(f".{version}.partial.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    try:
        maven.fetch_jars([f"{COORDINATE}:{version}"], work / "libs", f"Kafka's Java client {version}")
    except GregorError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    (work / STAMP).write_text(version + "\n")
    shutil.rmtree(home, ignore_errors=True)  # an unfinished fetch without its stamp
    try:
        work.rename(home)
    except OSError:  # another process finished first
        shutil.rmtree(work, ignore_errors=True)


def _compile(home: Path, progress) -> Path:
    """The driver's jar for this source, compiled once per version and source."""
    classes = home / f"driver-{source_hash()}"
    if (classes / DRIVER_JAR).is_file():
        return classes
    progress(f"compiling {DRIVER_SOURCE.name} against kafka-clients {home.name}")
    work = classes.with_name(f".{classes.name}.{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    (work / "classes").mkdir(parents=True)
    argv = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "11", "-cp", f"{home / 'libs'}/*"]
    result = subprocess.run(
        [*argv, "-d", str(work / "classes"), str(DRIVER_SOURCE)], capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        first = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr[-300:])
        raise GregorError(f"javac failed on Gregor's Java driver against kafka-clients {home.name}: {first.strip()}")
    with zipfile.ZipFile(work / DRIVER_JAR, "w") as jar:  # class-data sharing maps classes from jars only
        for path in sorted((work / "classes").rglob("*.class")):
            jar.write(path, path.relative_to(work / "classes").as_posix())
    shutil.rmtree(work / "classes")
    try:
        work.rename(classes)
    except OSError:  # another process compiled the same source first
        shutil.rmtree(work, ignore_errors=True)
    _mark_used(classes)
    prune_builds(home, classes)
    return classes


def _train(home: Path, classes: Path, progress) -> Path | None:
    """A class-data archive of what a driver loads (a producer and a consumer built,
    nothing reached), so that later JVMs map those classes."""
    archive = classes / "driver.jsa"
    if archive.is_file():
        return archive
    progress("writing the Java client's class-data archive (a training run)")
    partial = classes / f".driver.jsa.{os.getpid()}"
    client = JavaClient(home.name, home, classes, None)
    argv = client.command((f"-XX:ArchiveClassesAtExit={partial}",)) + ["--train"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        progress(f"no class-data archive (the training run failed: {result.stderr.strip()[-200:]}); JVMs start without")
        return None
    partial.rename(archive)
    return archive


def install(version: str | None = None, progress: Callable[[str], None] = print) -> JavaClient:
    """The compiled driver of `version` (default: the newest kafka-clients), built if missing."""
    version = resolve_version(version)
    found = installed(version)
    if found is not None:
        java()
        progress(f"Kafka's Java client {version}: built in {found.classes}")
        return found
    require_jdk()
    home = cache_root() / version
    _fetch_jars(version, home, progress)
    classes = _compile(home, progress)
    archive = _train(home, classes, progress)
    progress(f"Kafka's Java client {version} ready in {classes}")
    return JavaClient(version, home, classes, archive)
