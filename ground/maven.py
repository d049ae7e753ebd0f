"""Maven Central from the controller host: which releases an artifact has, and its jars.

Kafka's brokers (harness/systems/kafka/install.py) and Kafka's Java client
(workloads/java_client/build.py) both come from Maven Central, through the
ordinary `mvn` client. The version list is the artifact's
maven-metadata.xml, read at most once a day and cached, so that a machine
that was online once keeps working offline.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

from ground.atomic import write_atomic
from ground.errors import GregorError

CENTRAL = "https://repo1.maven.org/maven2"
METADATA_MAX_AGE_S = 24 * 3600
SETTINGS_ENV = "GREGOR_MAVEN_SETTINGS"  # a settings.xml for a mirror or proxy (also used by the tests)

_UNREACHABLE = (
    "Could not transfer",
    "UnknownHost",
    "Connection refused",
    "connect timed out",
    "Network is unreachable",
    "No route to host",
    "Connect to ",
    "Read timed out",
)


def repository() -> str:
    """Maven Central, or the mirror that $GREGOR_MAVEN_SETTINGS names (the
    same one Maven itself is told to use)."""
    settings = os.environ.get(SETTINGS_ENV)
    if settings and os.path.isfile(settings):
        try:
            mirror = ElementTree.parse(settings).getroot().find(".//mirror/url")
        except ElementTree.ParseError:
            mirror = None
        if mirror is not None and (mirror.text or "").strip():
            return mirror.text.strip().rstrip("/")
    return CENTRAL


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def parse_releases(xml: str, oldest: tuple[int, ...]) -> list[str]:
    """Release versions (x.y.z) from `oldest` on, oldest first, of a maven-metadata.xml."""
    found = [v.text.strip() for v in ElementTree.fromstring(xml).iter("version") if v.text]
    releases = [v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v) and version_key(v) >= oldest]
    return sorted(set(releases), key=version_key)


def release_versions(
    coordinate: str, cached: Path, oldest: tuple[int, ...], base: str | None = None, refresh: bool = False
) -> list[str]:
    """The releases of `coordinate` ("group:artifact") on Maven Central, asked at most
    once a day (kept in `cached`; the cache serves when the network does not)."""
    fresh = cached.is_file() and time.time() - cached.stat().st_mtime < METADATA_MAX_AGE_S
    if fresh and not refresh:
        return parse_releases(cached.read_text(), oldest)
    group, artifact = coordinate.split(":")
    url = f"{base or repository()}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:
            xml = answer.read().decode()
        versions = parse_releases(xml, oldest)
    except (OSError, ValueError, ElementTree.ParseError) as error:
        if cached.is_file():
            return parse_releases(cached.read_text(), oldest)
        raise GregorError(
            f"Maven Central is unreachable (cannot read the version list of {artifact} at {url}: "
            f"{getattr(error, 'reason', error)}); check the network or proxy and retry"
        ) from None
    write_atomic(cached, xml)
    return versions


def newest(versions: list[str], count: int = 5) -> str:
    """The newest `count` versions, newest first, as one line's words."""
    return ", ".join(reversed(versions[-count:]))


def pom(name: str, coordinates: list[str]) -> str:
    """A throwaway pom whose only job is to name what Maven must fetch ("group:artifact:version" each)."""
    dependencies = "".join(
        "\n    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
            *coordinate.split(":")
        )
        for coordinate in coordinates
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>gregor</groupId><artifactId>{name}</artifactId><version>1</version>
  <dependencies>{dependencies}
  </dependencies>
</project>
"""


def fetch_jars(coordinates: list[str], into: Path, what: str, transitive: bool = True, mvn: str = "mvn") -> None:
    """Copies the jars of `coordinates` ("group:artifact:version"), with their runtime
    dependencies when `transitive`, into the directory `into`; one line naming `what` on failure."""
    if shutil.which(mvn) is None:
        raise GregorError("Maven ('mvn') not found; install it: apt-get install maven")
    into.mkdir(parents=True, exist_ok=True)
    settings = os.environ.get(SETTINGS_ENV)
    common = [mvn, "-B", "-ntp", "-Dstyle.color=never", *(["-s", settings] if settings else [])]
    with tempfile.TemporaryDirectory(prefix="gregor-maven-") as work:
        if transitive:
            pom_file = Path(work) / "pom.xml"
            pom_file.write_text(pom(f"fetch-{os.getpid()}", coordinates))
            goals = [
                "-f",
                str(pom_file),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={into}",
            ]
            results = [subprocess.run(common + goals, capture_output=True, text=True, cwd=work)]
        else:
            results = [
                subprocess.run(
                    common + ["dependency:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={into}"],
                    capture_output=True,
                    text=True,
                    cwd=work,
                )
                for coordinate in coordinates
            ]
    for result in results:
        if result.returncode == 0:
            continue
        output = result.stdout + result.stderr
        if any(marker in output for marker in _UNREACHABLE):
            raise GregorError(
                f"Maven Central is unreachable (Maven could not download {what}); "
                "check the network or proxy settings in ~/.m2/settings.xml and retry"
            )
        last = next((line for line in output.splitlines() if "[ERROR]" in line), output.strip()[-300:])
        raise GregorError(f"Maven failed to fetch {what}: {last.strip()}")
