"""Builds Tansu from crates.io with cargo, cached per version.

`cargo install tansu --version V --locked --features postgres,dynostore`
takes about 11 minutes on 2 cores (without --locked its storage crate does
not compile against a newer deadpool), so the result is kept in
~/.cache/gregor/tansu/<V>/bin/tansu and a file lock makes a second install
of the same version (setup's background build and a test, say) wait for the
first instead of compiling twice. Tansu's storage crate ships its schema
only as SQLite DDL; a copy of it is kept beside the binary (postgres.py
turns it into PostgreSQL's). Which versions exist is crates.io's answer.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ground.atomic import write_json
from ground.errors import GregorError
from ground.paths import cache_dir

DEFAULT_VERSION = "0.6.0"
FEATURES = "postgres,dynostore"
INDEX = "https://index.crates.io/ta/ns/tansu"  # crates.io's sparse index entry, as cargo reads it
STAMP = "gregor-installed.json"


@dataclass(frozen=True)
class TansuInstall:
    version: str
    home: Path

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "tansu"

    @property
    def ddl(self) -> Path:
        return self.home / "ddl"


def cache_root() -> Path:
    return cache_dir() / "tansu"


def installed(version: str) -> TansuInstall | None:
    home = cache_root() / version
    if (home / STAMP).is_file() and (home / "bin" / "tansu").is_file():
        return TansuInstall(version, home)
    return None


def crate_versions() -> list[str]:
    """Released (non-yanked, non-pre-release) versions of the tansu crate, oldest first."""
    with urllib.request.urlopen(INDEX, timeout=20) as answer:
        entries = [json.loads(line) for line in answer.read().decode().splitlines() if line.strip()]
    found = [e["vers"] for e in entries if not e.get("yanked") and re.fullmatch(r"\d+\.\d+\.\d+", e["vers"])]
    return sorted(set(found), key=lambda v: tuple(int(p) for p in v.split(".")))


def check_version(version: str) -> str:
    if installed(version) is not None:
        return version
    try:
        versions = crate_versions()
    except OSError as error:
        raise GregorError(
            f"crates.io is unreachable (cannot list tansu versions: "
            f"{getattr(error, 'reason', error)}); check the network and retry"
        ) from None
    if version not in versions:
        raise GregorError(
            f"unknown Tansu version {version!r}: crates.io does not have it; newest: "
            f"{', '.join(reversed(versions[-4:]))}"
        )
    return version


@contextmanager
def _lock(version: str):
    """One build of a version at a time on this machine; others wait for it."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{version}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def storage_ddl_source(version: str) -> Path | None:
    """The SQLite DDL of tansu-storage in cargo's registry (extracted by the build)."""
    cargo_home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    found = sorted(cargo_home.glob(f"registry/src/*/tansu-storage-{version}/src/ddl"))
    return found[-1] if found else None


def install(version: str | None = None, progress: Callable[[str], None] = print, cargo: str = "cargo") -> TansuInstall:
    """Builds `version` (default DEFAULT_VERSION) unless it is cached."""
    version = check_version(version or DEFAULT_VERSION)
    done = installed(version)
    if done is not None:
        return done
    with _lock(version):
        done = installed(version)
        if done is not None:
            progress(f"Tansu {version} was built meanwhile: {done.binary}")
            return done
        home = cache_root() / version
        if not (home / "bin" / "tansu").is_file():
            _build(version, home, progress, cargo)
        ddl = storage_ddl_source(version)
        if ddl is None:
            raise GregorError(
                f"cargo built Tansu {version} but its tansu-storage-{version} sources are not in "
                "cargo's registry; run: cargo fetch, or remove ~/.cache/gregor/tansu and retry"
            )
        shutil.rmtree(home / "ddl", ignore_errors=True)
        shutil.copytree(ddl, home / "ddl")
        write_json(home / STAMP, {"version": version, "features": FEATURES})
    progress(f"Tansu {version} installed: {home / 'bin' / 'tansu'}")
    return installed(version)


def cargo_tool(cargo: str) -> str:
    """cargo on the PATH, else rustup's usual place."""
    found = shutil.which(cargo) or (cargo if Path(cargo).is_file() else None)
    home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "bin" / "cargo"
    if found is None and cargo == "cargo" and home.is_file():
        found = str(home)
    if found is None:
        raise GregorError("cargo not found; install Rust (rustup, or Debian's cargo) to build Tansu")
    return found


def _build(version: str, home: Path, progress, cargo: str) -> None:
    cargo = cargo_tool(cargo)
    partial = home.with_name(f".{version}.partial.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    log = cache_root() / f"build-{version}.log"
    progress(f"building Tansu {version} with cargo (crates.io; about 11 minutes on 2 cores, once; log {log})")
    with open(log, "w") as out:
        result = subprocess.run(
            [
                # the lowest priority: setup leaves the build running in the background
                # while the suite or a demo starts brokers and Spark on the same cores
                "nice",
                "-n",
                "19",
                cargo,
                "install",
                "tansu",
                "--version",
                version,
                "--locked",
                "--features",
                FEATURES,
                "--root",
                str(partial),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        text = log.read_text(errors="replace")
        last = next((line for line in reversed(text.splitlines()) if line.startswith("error")), "see the log")
        raise GregorError(f"cargo could not build Tansu {version}: {last.strip()} (log: {log})")
    shutil.rmtree(home, ignore_errors=True)
    partial.rename(home)
