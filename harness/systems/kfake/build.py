"""Builds Gregor's kfake server (main.go here) against one kfake version, cached.

kfake (github.com/twmb/franz-go/pkg/kfake) has no releases of its own, only
pseudo-versions, and it lives in franz-go's repository: its code at a commit
needs franz-go's packages of that commit, while its go.mod names an older
franz-go. So Gregor pairs it with the first franz-go release at or after
the kfake commit's time (checked: kfake v0.0.0-20260918054303 builds with
franz-go v1.22.0, tagged at the same second). Which kfake options exist
(ListenFn, DataDir, ...) is read from the module's own source, so an older
kfake is refused in one line instead of failing to compile.

Everything goes through the Go toolchain and the Go module proxy; the
binary lands in ~/.cache/gregor/kfake/<version>/kfake-server.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ground.atomic import write_json
from ground.errors import GregorError
from ground.paths import cache_dir

MODULE = "github.com/twmb/franz-go/pkg/kfake"
FRANZ = "github.com/twmb/franz-go"
HERE = Path(__file__).resolve().parent
STAMP = "build.json"
BINARY = "kfake-server"

# The kfake options main.go needs (required) or uses when present (optional).
REQUIRED = ("NumBrokers", "Ports", "ListenFn", "ClusterID", "WithLogger")
OPTIONAL = ("DataDir", "BrokerConfigs", "EnableSASL", "Superuser")

_OPTIONAL_GO = {
    "DataDir": '\tif dataDir != "" {\n\t\topts = append(opts, kfake.DataDir(dataDir))\n\t}\n',
    "BrokerConfigs": "\tif len(configs) > 0 {\n\t\topts = append(opts, kfake.BrokerConfigs(configs))\n\t}\n",
    "EnableSASL": "\tif len(users) > 0 {\n\t\topts = append(opts, kfake.EnableSASL())\n\t}\n",
    "Superuser": (
        "\tfor _, user := range users {\n\t\topts = append(opts, kfake.Superuser(user[0], user[1], user[2]))\n\t}\n"
    ),
}
_MISSING_GO = {
    "DataDir": (
        '\tif dataDir != "" {\n\t\treturn nil, fmt.Errorf("this kfake version cannot keep data (no DataDir)")\n\t}\n'
    ),
    "BrokerConfigs": (
        '\tif len(configs) > 0 {\n\t\treturn nil, fmt.Errorf("this kfake version takes no broker '
        'settings (no BrokerConfigs)")\n\t}\n'
    ),
    "EnableSASL": (
        '\tif len(users) > 0 {\n\t\treturn nil, fmt.Errorf("this kfake version has no SASL (no EnableSASL)")\n\t}\n'
    ),
    "Superuser": "",
}


@dataclass(frozen=True)
class KfakeBuild:
    version: str  # the kfake pseudo-version
    franz_go: str  # the franz-go release it was built with
    features: tuple[str, ...]
    binary: Path


def cache_root() -> Path:
    return cache_dir() / "kfake"


def go_tool() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not found:
        raise GregorError(
            "the Go toolchain ('go') is not found; install Go 1.22+ (https://go.dev/dl or "
            "Debian's golang) to build kfake"
        )
    return found


def _go(args: list[str], cwd: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    return subprocess.run([go_tool(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _scratch_module(directory: str) -> None:
    Path(directory, "go.mod").write_text("module gregor/kfakeserver\n\ngo 1.21\n")


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def module_info(module: str, query: str, directory: str) -> dict:
    """`go list -m -json module@query` (the module proxy's answer)."""
    result = _go(["list", "-m", "-json", f"{module}@{query}"], directory, timeout=300)
    if result.returncode != 0:
        raise LookupError(_last_line(result.stderr or result.stdout))
    return json.loads(result.stdout)


def module_source(module: str, version: str, directory: str) -> str:
    """Downloads `module@version` into the module cache and returns its source folder.

    `go list -m -json` names the folder only when the module is already in the
    cache, which it never is on a fresh machine."""
    result = _go(["mod", "download", "-json", f"{module}@{version}"], directory, timeout=600)
    try:
        answer = json.loads(result.stdout or "{}")
    except ValueError:
        answer = {}
    if result.returncode != 0 or answer.get("Error") or not answer.get("Dir"):
        why = answer.get("Error") or _last_line(result.stderr or result.stdout)
        raise GregorError(f"cannot download {module}@{version} from the Go module proxy: {why}")
    return answer["Dir"]


def proxy_versions(module: str) -> list[str]:
    """Every version the module proxy lists (pseudo-versions too), oldest first."""
    proxy = subprocess.run([go_tool(), "env", "GOPROXY"], capture_output=True, text=True).stdout.strip()
    base = next((p for p in re.split(r"[,|]", proxy) if p.startswith("http")), "https://proxy.golang.org")
    with urllib.request.urlopen(f"{base.rstrip('/')}/{module.lower()}/@v/list", timeout=30) as answer:
        versions = answer.read().decode().split()
    return sorted(versions, key=pseudo_time)


def pseudo_time(version: str) -> str:
    """The yyyymmddhhmmss of a pseudo-version ('' for a tag)."""
    found = re.search(r"(\d{14})-[0-9a-f]{12}$", version)
    return found.group(1) if found else ""


def resolve(version: str, directory: str) -> dict:
    """The kfake module version `version` names ('latest' or a pseudo-version)."""
    try:
        return module_info(MODULE, version, directory)
    except LookupError as why:
        try:
            newest = ", ".join(reversed(proxy_versions(MODULE)[-4:]))
        except OSError:
            newest = "(the module proxy's list is unreachable)"
        raise GregorError(
            f"unknown kfake version {version!r}: the Go module proxy does not have it ({why}); newest: {newest}"
        ) from None


def matching_franz_go(kfake_version: str, directory: str) -> str:
    """The first franz-go release at or after the kfake commit's time."""
    stamp = pseudo_time(kfake_version)
    result = _go(["list", "-m", "-versions", "-json", FRANZ], directory, timeout=300)
    if result.returncode != 0:
        raise GregorError(f"cannot list {FRANZ} releases: {_last_line(result.stderr)}")
    releases = [v for v in json.loads(result.stdout).get("Versions", []) if re.fullmatch(r"v\d+\.\d+\.\d+", v)]
    chosen = None
    for release in reversed(releases):  # newest first; stop at the first one older than kfake
        when = re.sub(r"\D", "", module_info(FRANZ, release, directory).get("Time", ""))[:14]
        if when and when < stamp:
            break
        chosen = release
    if chosen is None:
        raise GregorError(f"no {FRANZ} release is as new as kfake {kfake_version}; try an older kfake")
    return chosen


def features(source_dir: str) -> tuple[str, ...]:
    text = "".join(
        p.read_text(errors="replace") for p in Path(source_dir).glob("*.go") if not p.name.endswith("_test.go")
    )
    return tuple(name for name in REQUIRED + OPTIONAL if re.search(rf"^func {name}\(", text, re.M))


def options_go(found: tuple[str, ...]) -> str:
    """optionalOpts() for main.go: the options this kfake has, refusals for those it lacks."""
    body = "".join(_OPTIONAL_GO[name] if name in found else _MISSING_GO[name] for name in OPTIONAL)
    uses_fmt = any(name not in found and _MISSING_GO[name] for name in OPTIONAL)
    imports = '\t"fmt"\n\n' if uses_fmt else ""
    return (
        f"// Generated by Gregor (harness/systems/kfake/build.py) for the options this kfake has.\n"
        f'package main\n\nimport (\n{imports}\t"github.com/twmb/franz-go/pkg/kfake"\n)\n\n'
        "func optionalOpts(dataDir string, configs map[string]string, users [][3]string) ([]kfake.Opt, error) {\n"
        f"\tvar opts []kfake.Opt\n{body}\treturn opts, nil\n}}\n"
    )


def installed(version: str) -> KfakeBuild | None:
    """A finished build of this exact pseudo-version (no network)."""
    stamp = cache_root() / version / STAMP
    try:
        data = json.loads(stamp.read_text())
    except (FileNotFoundError, ValueError):
        return None
    binary = stamp.parent / BINARY
    if not binary.is_file():
        return None
    return KfakeBuild(data["version"], data["franz_go"], tuple(data["features"]), binary)


def latest_installed() -> KfakeBuild | None:
    builds = [b for b in (installed(d.name) for d in cache_root().glob("v*")) if b is not None]
    return max(builds, key=lambda b: pseudo_time(b.version), default=None)


@contextmanager
def _lock():
    """One kfake build at a time on this machine (setup's and a test's, say)."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(version: str = "latest", progress: Callable[[str], None] = print) -> KfakeBuild:
    """Resolves `version`, builds the server unless that version is cached."""
    if version != "latest" and installed(version) is not None:
        return installed(version)
    with _lock():
        return _build(version, progress)


def _build(version: str, progress: Callable[[str], None]) -> KfakeBuild:
    with tempfile.TemporaryDirectory(prefix="gregor-kfake-") as work:
        _scratch_module(work)
        try:
            info = resolve(version, work)
        except GregorError as error:
            cached = latest_installed() if version == "latest" else None
            if cached is None:
                raise
            progress(
                f"cannot ask the Go module proxy for the newest kfake ({error}); "
                f"using the newest built one, {cached.version}"
            )
            return cached
        resolved = info["Version"]
        done = installed(resolved)
        if done is not None:
            return done
        found = features(module_source(MODULE, resolved, work))
        lacking = [name for name in REQUIRED if name not in found]
        if lacking:
            raise GregorError(
                f"kfake {resolved} is too old for Gregor: it has no {lacking[0]} option "
                "(listen address); use a kfake from October 2025 or later, or latest"
            )
        franz = matching_franz_go(resolved, work)
        progress(
            f"building kfake {resolved} with franz-go {franz} (Go toolchain, module proxy; "
            "a few minutes the first time)"
        )
        shutil.copyfile(HERE / "main.go", Path(work, "main.go"))
        Path(work, "options.go").write_text(options_go(found))
        fetched = _go(["get", f"{MODULE}@{resolved}", f"{FRANZ}@{franz}"], work)
        if fetched.returncode != 0:
            raise GregorError(f"go get kfake {resolved} with franz-go {franz} failed: {_last_line(fetched.stderr)}")
        target = cache_root() / resolved
        partial = target.with_name(f".{resolved}.partial.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        built = _go(["build", "-trimpath", "-o", str(partial / BINARY), "."], work)
        if built.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise GregorError(f"building kfake {resolved} with franz-go {franz} failed: {_last_line(built.stderr)}")
        write_json(partial / STAMP, {"version": resolved, "franz_go": franz, "features": list(found)})
        if installed(resolved) is None:
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        else:
            shutil.rmtree(partial, ignore_errors=True)
    result = installed(resolved)
    progress(f"kfake {resolved} built: {result.binary}")
    return result
