"""`gregor scenarios`: run the guarantee catalogue and write its page.

For each claim (harness/controller/catalogue.py, scenarios.toml) the lab is
brought up with the claim's broker settings (and storage), then K runs of
the unsafe side and K of the safe side alternate, each a `gregor run`
process of its own with a fixed seed (base seed + run number), checked here
in one Spark session. After every run store/scenarios/<time>/scenarios.json
and index.html are rewritten, so an interrupted catalogue still leaves a
readable page. A run that fails is recorded as an error in its cell; it
never stops the catalogue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ground.atomic import write_json
from ground.errors import GregorError
from ground.options import add_options
from ground.signals import sigterm_as_interrupt
from harness.controller import catalogue
from harness.controller.lab_options import add_lab_arguments
from harness.controller.run_config import CLIENT_OPTIONS, client_name
from workloads.kafka_client import LIBRDKAFKA

DEFAULT_LAB = "gscen"  # its own lab: the catalogue brings labs up and down
RUN_OVERHEAD_S = 600  # lab reuse, topics, drain, client stops: beyond the time limit


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "scenarios",
        help="run the guarantee catalogue: each claim's unsafe and safe side",
        description="Runs each claim of the catalogue (harness/controller/scenarios.toml) K times on "
        "its unsafe and its safe side and writes store/scenarios/<time>/index.html. "
        "--list prints the claims.",
    )
    parser.add_argument("--list", action="store_true", help="print one line per claim and exit")
    parser.add_argument("--only", default=None, metavar="NAME,...", help="run only these claims")
    parser.add_argument("--runs", type=int, default=1, metavar="K", help="runs per side (default 1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run k uses seed+k")
    parser.add_argument(
        "--time-limit", type=float, default=60.0, metavar="S", help="seconds of main phase per run (default 60)"
    )
    parser.add_argument("--store", default="store", help="store directory (default ./store)")
    parser.add_argument(
        "--catalogue",
        default=str(catalogue.CATALOGUE),
        help="the catalogue file (default: scenarios.toml beside this module)",
    )
    parser.add_argument("--keep-lab", action="store_true", help="leave the last lab up")
    add_lab_arguments(parser)
    add_options(parser, CLIENT_OPTIONS)  # for every claim that does not pin its client
    parser.set_defaults(func=main)


def main(args) -> int:
    claims = catalogue.select(catalogue.load(Path(args.catalogue)), args.only)
    if args.list:
        width = max(len(c.name) for c in claims)
        for claim in claims:
            print(f"{claim.name:<{width}}  {claim.promise}")
        return 0
    if args.runs < 1:
        raise GregorError(f"--runs must be at least 1, got {args.runs}")
    if args.time_limit <= 0:
        raise GregorError(f"--time-limit must be positive, got {args.time_limit}")
    from harness.lab import lab_name

    client_name("--client", args.client)
    if args.client != LIBRDKAFKA or args.client_version:
        client = ["--client", args.client] + (["--client-version", args.client_version] if args.client_version else [])
        for claim in claims:  # a setting the client cannot honour is refused before anything starts
            for side in catalogue.SIDES:
                if "client" not in claim.options(side):
                    catalogue.check_run_options(claim, side, client)
    lab = lab_name(args.lab or DEFAULT_LAB, args.backend)
    with sigterm_as_interrupt():
        summary = Catalogue(
            claims,
            runs=args.runs,
            seed=args.seed,
            time_limit=args.time_limit,
            store=args.store,
            lab=lab,
            backend=args.backend,
            system=args.system,
            version=args.version,
            keep_lab=args.keep_lab,
            client=args.client,
            client_version=args.client_version,
        ).run()
    findings = [c["name"] for c in summary["claims"] if c["figures"]["safe"]["hits"]]
    print(f"scenarios: {summary['page']}")
    if findings:
        print(f"scenarios: safe side with bad anomalies (red findings): {', '.join(findings)}")
    return 0


def say(message: str) -> None:
    print(message, flush=True)


class Catalogue:
    """One run of the catalogue: its directory, its labs, its summary."""

    def __init__(
        self,
        claims,
        runs: int,
        seed: int,
        time_limit: float,
        store: str,
        lab: str,
        backend: str = "local",
        system: str = "kafka",
        version: str | None = None,
        keep_lab: bool = False,
        progress=say,
        client: str = LIBRDKAFKA,
        client_version: str | None = None,
    ):
        self.claims, self.runs, self.seed, self.time_limit = claims, runs, seed, time_limit
        self.client, self.client_version = client, client_version
        self.lab, self.backend, self.system, self.version = lab, backend, system, version
        self.keep_lab, self.progress = keep_lab, progress
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.directory = Path(store).resolve() / "scenarios" / stamp
        suffix = 1
        while self.directory.exists():
            suffix += 1
            self.directory = Path(store).resolve() / "scenarios" / f"{stamp}-{suffix}"
        self.runs_dir = self.directory / "runs"
        self.runs_dir.mkdir(parents=True)
        self.summary = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runs_per_side": runs,
            "seed": seed,
            "time_limit_s": time_limit,
            "backend": backend,
            "system": system,
            "version": version,
            "client": client,
            "client_version": client_version,
            "lab": lab,
            "finished": False,
            "command": "gregor " + " ".join(sys.argv[1:]) if sys.argv[1:] else None,
            "claims": [self.claim_entry(c) for c in claims],
        }

    def claim_entry(self, claim) -> dict:
        return {
            "name": claim.name,
            "promise": claim.promise,
            "note": claim.note,
            "expected": list(claim.expected),
            "lab": claim.lab,
            "storage": claim.storage,
            "sides": {
                side: {
                    "settings": claim.describe_side(side),
                    "system": claim.side_system(side),
                    "client": claim.client(side, self.client),
                    "arguments": claim.run_arguments(side, self.seed, self.time_limit)
                    + self.client_arguments(claim, side),
                    "runs": [],
                }
                for side in catalogue.SIDES
            },
            "figures": {side: catalogue.side_figures([], side) for side in catalogue.SIDES},
        }

    def client_arguments(self, claim, side: str) -> list[str]:
        """`--client` (and `--client-version`) of the catalogue, for a side that pins no client."""
        if "client" in claim.options(side):
            return []
        return ["--client", self.client] + (["--client-version", self.client_version] if self.client_version else [])

    # --- the loop ----------------------------------------------------------------------
    def run(self) -> dict:
        self.write()
        try:
            for claim, entry in zip(self.claims, self.summary["claims"]):
                self.progress(f"scenarios: {claim.name}: {claim.promise}")
                if claim.sides_share_a_lab():
                    if not self.side_lab(claim, catalogue.SIDES[0], entry, both=True):
                        continue
                    for k in range(self.runs):
                        for side in catalogue.SIDES:
                            entry["sides"][side]["runs"].append(self.one_run(claim, side, k))
                            self.refresh(entry)
                    continue
                for side in catalogue.SIDES:  # a lab per side: each side's runs together
                    if not self.side_lab(claim, side, entry):
                        continue
                    for k in range(self.runs):
                        entry["sides"][side]["runs"].append(self.one_run(claim, side, k))
                        self.refresh(entry)
            self.summary["finished"] = True
        finally:
            self.write()
            if not self.keep_lab:
                from harness.lab import Lab

                Lab.down(self.lab, progress=self.progress, backend=self.backend)
        self.summary["page"] = str(self.directory / "index.html")
        return self.summary

    def side_lab(self, claim, side: str, entry: dict, both: bool = False) -> bool:
        """The lab of a side (of both sides with `both`); False, with the error in the
        side's runs, when it cannot be had."""
        try:
            self.lab_for(claim, side)
            return True
        except GregorError as error:
            self.progress(f"scenarios: {claim.name}: no lab: {error}")
            for each in catalogue.SIDES if both else (side,):
                entry["sides"][each]["runs"].append({"error": f"lab: {error}"})
            self.refresh(entry)
            return False

    def version_of(self, claim, side: str) -> str | None:
        """The side's system version: the one the claim pins, else the catalogue's --version."""
        return claim.side_system(side).get("version") or self.version

    def lab_for(self, claim, side: str = "unsafe") -> None:
        """The side's lab: the running one if it has the claim's settings, else a new one."""
        from harness.lab import Lab

        version = self.version_of(claim, side)
        features = claim.side_system(side).get("transaction-version")
        overrides = claim.side_broker_config(side)
        try:
            lab = Lab.attach(self.lab, backend=self.backend)
            same = (
                getattr(lab.system, "overrides", {}) == overrides
                and lab.storage == claim.storage
                and lab.system.name == self.system
                and (version in (None, lab.version))
                and getattr(lab.system, "options", {}).get("transaction_version") == features
            )
        except GregorError:
            lab, same = None, False
        if same:
            lab.heal_all()
            return
        Lab.down(self.lab, progress=self.progress, backend=self.backend)
        Lab.up(
            nodes=3,
            version=version,
            broker_overrides=overrides,
            name=self.lab,
            progress=self.progress,
            backend=self.backend,
            system=self.system,
            storage=claim.storage,
            system_options=None if features is None else {"transaction_version": features},
        )

    def one_run(self, claim, side: str, k: int) -> dict:
        seed = self.seed + k
        name = f"{claim.name}-{side}"
        argv = [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            *claim.run_arguments(side, seed, self.time_limit),
            *self.client_arguments(claim, side),
            "--lab",
            self.lab,
            "--backend",
            self.backend,
            "--system",
            self.system,
            "--data-on",
            claim.storage,
            "--store",
            str(self.runs_dir),
            "--name",
            name,
            "--no-check",
        ]
        if self.version_of(claim, side):
            argv += ["--version", self.version_of(claim, side)]
        self.progress(f"scenarios: {name} run {k + 1}/{self.runs} (seed {seed})")
        record: dict = {"seed": seed, "error": None}
        log = self.directory / "logs" / f"{name}-{k + 1}.log"
        log.parent.mkdir(exist_ok=True)
        started = time.monotonic()
        try:
            with open(log, "w") as out:
                result = subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, timeout=self.time_limit + RUN_OVERHEAD_S
                )
            code = result.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        record["run_s"] = round(time.monotonic() - started, 1)
        record["log"] = os.path.relpath(log, self.directory)
        run_dir = self.latest_run(name)
        if code != 0 or run_dir is None:
            record["error"] = f"gregor run exited {code}; see {record['log']}"
            if run_dir is not None:
                record["run_dir"] = os.path.relpath(run_dir, self.directory)
            self.progress(f"scenarios: {name} run {k + 1}: {record['error']}")
            return record
        record["run_dir"] = os.path.relpath(run_dir, self.directory)
        try:
            record.update(self.check(claim, side, run_dir))
        except Exception as error:  # noqa: BLE001 - one run's check must not end the catalogue
            record["error"] = f"check failed: {str(error).splitlines()[0][:300]}"
        self.progress(f"scenarios: {name} run {k + 1}: " + describe_run(record, side))
        return record

    def latest_run(self, name: str) -> Path | None:
        found = sorted((self.runs_dir / name).glob("2*")) if (self.runs_dir / name).is_dir() else []
        found = [p for p in found if (p / "test.json").exists()]
        return found[-1] if found else None

    def check(self, claim, side: str, run_dir: Path) -> dict:
        from harness.controller.run import check_and_report
        from harness.lab import Lab

        try:  # the claim's lab is still up: the brokers' own record of what the anomalies name
            lab = Lab.attach(self.lab, backend=self.backend)
        except GregorError:
            lab = None
        check_and_report(str(run_dir), lab)
        results = json.loads((run_dir / "results.json").read_text())
        test = json.loads((run_dir / "test.json").read_text())
        judged = catalogue.judge(claim, side, results, test)
        judged["report"] = os.path.relpath(run_dir / "report.html", self.directory)
        return judged

    # --- output -----------------------------------------------------------------------------
    def refresh(self, entry: dict) -> None:
        for side in catalogue.SIDES:
            entry["figures"][side] = catalogue.side_figures(entry["sides"][side]["runs"], side)
        self.write()

    def write(self) -> None:
        from harness.controller.scenarios_page import write_page

        write_json(self.directory / "scenarios.json", self.summary, indent=1)
        write_page(self.directory, self.summary)


def describe_run(record: dict, side: str) -> str:
    if record.get("error"):
        return record["error"]
    found = ", ".join(f"{n} {a['count']}" for n, a in record["anomalies"].items()) or "no anomaly"
    if side == "unsafe":
        head = "detected" if record["detected"] else "NOT detected"
    else:
        head = "clean" if record["clean"] else f"BAD ANOMALIES {', '.join(record['bad'])}"
    when = f", first at {record['first_s']} s" if record.get("first_s") is not None else ""
    truncated = record.get("truncated")
    gone = (
        f"; the drain found the log of key{'s' if len(truncated) > 1 else ''} {', '.join(map(str, truncated))}"
        " truncated below acknowledged offsets"
        if truncated
        else ""
    )
    return f"{head} ({found}{when}){gone}"
