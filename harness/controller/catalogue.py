"""The guarantee catalogue as data: claims, the runs that show them, and how a run is judged.

Each claim of the Kafka literature is one `[[claim]]` entry of
scenarios.toml beside this file: a promise in one sentence, the anomalies
that break it, the lab's broker settings, the `gregor run` options both
sides share, and the options of its unsafe and of its safe side. Adding a
claim is adding an entry; nothing here knows any claim by name.

A run of the unsafe side *detects* the claim when it shows one of the
expected anomalies (`unseen` only after a complete drain: an incomplete one
explains it). A run of the safe side is *clean* when it shows no bad
anomaly (results.json `allowed` false); one that does is a red finding.
"""

from __future__ import annotations

import argparse
import statistics
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ground.errors import GregorError
from harness.controller import run_config

CATALOGUE = Path(__file__).with_name("scenarios.toml")
SIDES = ("unsafe", "safe")
ENTRY_FIELDS = {"name", "promise", "expected", "lab", "storage", "run", "unsafe", "safe", "note", "system"}
# what a claim's [claim.system.SIDE] may pin for a side's lab (a reproduction's two sides can need
# two Kafka releases): the system's version, Kafka's transaction.version feature, and broker settings
# of that side only (key=value, as `gregor lab up --broker-config`), over the claim's `lab`
SYSTEM_FIELDS = {"version": str, "transaction-version": int, "broker-config": list}
NEEDS_COMPLETE_DRAIN = {"unseen"}
# Options the catalogue sets itself for every run.
RESERVED = {"lab", "backend", "system", "version", "store", "name", "seed", "no-check"}


@dataclass(frozen=True)
class Claim:
    name: str
    promise: str
    expected: tuple[str, ...]
    run: dict
    sides: dict[str, dict]
    lab: dict[str, str] = field(default_factory=dict)
    storage: str = "disk"
    note: str = ""
    system: dict[str, dict] = field(default_factory=dict)  # side -> its lab's pinned version, features

    def side_system(self, side: str) -> dict:
        """What the side pins of its lab ({} when the catalogue's own --version serves)."""
        return dict(self.system.get(side, {}))

    def side_broker_config(self, side: str) -> dict[str, str]:
        """The side's lab's broker settings: the claim's `lab`, then the side's own broker-config."""
        from harness.systems.kafka.config import parse_overrides

        return {**self.lab, **parse_overrides(self.side_system(side).get("broker-config"), None)}

    def sides_share_a_lab(self) -> bool:
        return self.side_system("unsafe") == self.side_system("safe")

    def options(self, side: str, time_limit: float | None = None) -> dict:
        """The run options of one side: the shared ones, then the side's."""
        merged = {**self.run, **self.sides[side]}
        if time_limit is not None:
            merged["time-limit"] = time_limit
        return merged

    def run_arguments(self, side: str, seed: int, time_limit: float | None = None) -> list[str]:
        """`gregor run` arguments of one side (without lab, store and name)."""
        return options_to_argv({**self.options(side, time_limit), "seed": seed})

    def client(self, side: str, default: str) -> str:
        """The client library of a side's runs: the one the claim pins, else `default`
        (`gregor scenarios --client`)."""
        return str(self.options(side).get("client") or default)

    def describe_side(self, side: str) -> str:
        """The side's own settings in words, e.g. "acks=1", with the lab it pins: its Kafka
        version and transaction.version, its brokers' own settings (e.g. "broker
        transaction.partition.verification.enable=false")."""
        pinned = self.side_system(side)
        words = [f"Kafka {pinned['version']}"] if pinned.get("version") else []
        if pinned.get("transaction-version") is not None:
            words.append(f"transaction.version={pinned['transaction-version']}")
        words += [f"{k}={v}" if v is not True else k for k, v in self.sides[side].items()]
        words += [f"broker {pair}" for pair in pinned.get("broker-config", [])]
        return ", ".join(words) or "as shared"


def options_to_argv(options: dict) -> list[str]:
    """{"acks": "1", "client-netns": True, "topic-config": ["a=b"]} -> --acks 1 --client-netns --topic-config a=b,
    each option written as run_config.py declares it (a value, a switch or a repeated option)."""
    return run_config.options_to_argv(options)


def load(path: Path = CATALOGUE) -> list[Claim]:
    """Every claim of the catalogue file, each checked (GregorError naming the entry)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise GregorError(f"cannot read the catalogue {path}: {error}") from None
    claims = [parse_claim(entry, index) for index, entry in enumerate(data.get("claim", []))]
    names = [c.name for c in claims]
    for name in names:
        if names.count(name) > 1:
            raise GregorError(f"catalogue {path}: claim {name!r} appears twice")
    if not claims:
        raise GregorError(f"catalogue {path} has no [[claim]] entry")
    return claims


def parse_claim(entry: dict, index: int = 0) -> Claim:
    name = entry.get("name") or f"#{index + 1}"
    where = f"claim {name!r}"
    unknown = set(entry) - ENTRY_FIELDS
    if unknown:
        raise GregorError(
            f"{where}: unknown field {sorted(unknown)[0]!r}; fields are {', '.join(sorted(ENTRY_FIELDS))}"
        )
    for needed in ("name", "promise", "expected", "run", "unsafe", "safe"):
        if needed not in entry:
            raise GregorError(f"{where}: missing field {needed!r}")
    if not str(name).replace("-", "").isalnum() or not str(name).islower():
        raise GregorError(f"{where}: a name is lower-case letters, digits and '-'")
    expected = entry["expected"]
    if not isinstance(expected, list) or not expected or not all(isinstance(e, str) for e in expected):
        raise GregorError(f"{where}: expected must be a non-empty list of anomaly names")
    for table in ("run", "unsafe", "safe", "lab"):
        if not isinstance(entry.get(table, {}), dict):
            raise GregorError(f"{where}: {table} must be a table")
    for table in ("run", "unsafe", "safe"):
        reserved = RESERVED & set(entry[table])
        if reserved:
            raise GregorError(
                f"{where}: {table} sets --{sorted(reserved)[0]}, which `gregor scenarios` sets for every run"
            )
        try:
            options_to_argv(entry[table])
        except GregorError as error:
            raise GregorError(f"{where}: {table}: {error}") from None
    system = entry.get("system", {})
    if not isinstance(system, dict) or set(system) - set(SIDES):
        raise GregorError(f"{where}: system holds a table per side ({', '.join(SIDES)})")
    for side, pinned in system.items():
        if not isinstance(pinned, dict) or set(pinned) - set(SYSTEM_FIELDS):
            raise GregorError(f"{where}: system.{side} may pin only {', '.join(sorted(SYSTEM_FIELDS))}")
        for key, kind in SYSTEM_FIELDS.items():
            if key in pinned and not isinstance(pinned[key], kind):
                raise GregorError(f"{where}: system.{side}.{key} must be a {kind.__name__}")
        check_broker_config(pinned.get("broker-config", []), f"{where}: system.{side}.broker-config")
    claim = Claim(
        name=name,
        promise=" ".join(str(entry["promise"]).split()),
        expected=tuple(expected),
        run=dict(entry["run"]),
        sides={"unsafe": dict(entry["unsafe"]), "safe": dict(entry["safe"])},
        lab={str(k): str(v) for k, v in entry.get("lab", {}).items()},
        storage=str(entry.get("storage", "disk")),
        note=" ".join(str(entry.get("note", "")).split()),
        system={side: dict(pinned) for side, pinned in system.items()},
    )
    for side in SIDES:
        check_run_options(claim, side)
    return claim


def check_broker_config(pairs: list, where: str) -> None:
    """A side's broker-config: a list of key=value strings."""
    for pair in pairs:
        key, sep, _ = str(pair).partition("=")
        if not isinstance(pair, str) or not sep or not key.strip():
            raise GregorError(f"{where}: bad entry {pair!r}: use key=value, e.g. min.insync.replicas=2")


def check_run_options(claim: Claim, side: str, extra: list[str] | None = None):
    """The side's options (and `extra` arguments, e.g. the catalogue's --client) through
    `gregor run`'s own parser and checks: its RunConfig."""
    from harness.controller import run_cli

    parser = _RaisingParser(prog="gregor run")
    run_cli.add_arguments(parser)
    argv = claim.run_arguments(side, seed=0) + ["--data-on", claim.storage] + list(extra or [])
    try:
        return run_cli.validate(parser.parse_args(argv))
    except GregorError as error:
        raise GregorError(f"claim {claim.name!r} ({side}): {error}") from None


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise GregorError(message)


def select(claims: list[Claim], only: str | None) -> list[Claim]:
    if not only:
        return claims
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    known = {c.name for c in claims}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise GregorError(f"no claim named {unknown[0]!r}; see gregor scenarios --list")
    return [c for c in claims if c.name in wanted]


# --- judging runs -------------------------------------------------------------------------


def judge(claim: Claim, side: str, results: dict, test: dict) -> dict:
    """What one run shows: its anomalies, whether it detects (unsafe) or is
    clean (safe), and when the first anomaly that counts happened."""
    anomalies = {
        name: {
            "count": int(a.get("count") or 0),
            "allowed": bool(a.get("allowed")),
            "why_allowed": a.get("why_allowed"),
            "first_s": first_time(a),
        }
        for name, a in (results.get("anomalies") or {}).items()
        if int(a.get("count") or 0) > 0
    }
    drain_complete = bool((test.get("drain") or {}).get("complete"))
    found = [n for n in claim.expected if n in anomalies and (n not in NEEDS_COMPLETE_DRAIN or drain_complete)]
    bad = sorted(n for n, a in anomalies.items() if not a["allowed"])
    counting = found if side == "unsafe" else bad
    times = [anomalies[n]["first_s"] for n in counting if anomalies[n]["first_s"] is not None]
    return {
        "verdict": results.get("verdict"),
        "anomalies": anomalies,
        "expected_found": found,
        "bad": bad,
        "detected": bool(found),
        "clean": not bad,
        "drain_complete": drain_complete,
        "truncated": sorted((test.get("drain") or {}).get("truncated", {})),
        "first_s": min(times) if times else None,
    }


def first_time(anomaly: dict) -> float | None:
    times = [e.get("time_s") for e in anomaly.get("examples") or () if isinstance(e.get("time_s"), (int, float))]
    return round(min(times), 3) if times else None


def side_figures(runs: list[dict], side: str) -> dict:
    """Detection rate (unsafe) or false alarms (safe) over a side's runs, the
    median time to the first anomaly that counts, totals per anomaly, and the
    runs whose final drain found a key's log truncated below an acknowledged
    offset (evidence no anomaly counts when every lost record had been read)."""
    done = [r for r in runs if r.get("error") is None]
    hits = [r for r in done if (r["detected"] if side == "unsafe" else not r["clean"])]
    times = [r["first_s"] for r in hits if r.get("first_s") is not None]
    totals: dict[str, dict] = {}
    for run in done:
        for name, anomaly in run["anomalies"].items():
            entry = totals.setdefault(
                name, {"count": 0, "runs": 0, "allowed": anomaly["allowed"], "why_allowed": anomaly.get("why_allowed")}
            )
            entry["count"] += anomaly["count"]
            entry["runs"] += 1
            entry["allowed"] = entry["allowed"] and anomaly["allowed"]
    return {
        "runs": len(runs),
        "completed": len(done),
        "errors": len(runs) - len(done),
        "hits": len(hits),
        "median_first_s": round(statistics.median(times), 1) if times else None,
        "truncated": sum(1 for r in runs if r.get("truncated")),
        "anomalies": dict(sorted(totals.items())),
    }


# --- figures across catalogues ----------------------------------------------------


def _settings(summary: dict, side: dict) -> tuple:
    """What makes two runs of a side comparable: where and what they ran on,
    and every run argument except the seed."""
    argv = list(side.get("arguments") or ())
    if "--seed" in argv:
        at = argv.index("--seed")
        del argv[at : at + 2]
    return (summary.get("backend"), summary.get("system"), summary.get("version"), tuple(argv))


def merge(summaries: list[dict]) -> tuple[dict, list[str]]:
    """One summary of several finished catalogues (scenarios.json), so that
    detection rates can gather runs made at different times.

    A side's runs count together only when they ran with the settings of
    that side in the newest catalogue that has the claim; runs of older
    settings are left out, and each such omission is one line of the list
    returned beside the summary.
    """
    ordered = sorted(summaries, key=lambda s: s.get("started") or "")
    entries: dict[str, list[tuple[dict, dict]]] = {}  # claim name -> (catalogue, claim), oldest first
    for summary in ordered:
        for claim in summary.get("claims", []):
            entries.setdefault(claim["name"], []).append((summary, claim))
    left_out: list[str] = []
    claims = []
    for name, runs_of_claim in entries.items():
        latest_summary, latest = runs_of_claim[-1]
        merged = {key: value for key, value in latest.items() if key not in ("sides", "figures")}
        merged["sides"], merged["figures"] = {}, {}
        for side in SIDES:
            wanted = _settings(latest_summary, latest["sides"][side])
            runs = []
            for summary, claim in runs_of_claim:
                this = claim["sides"][side]
                if _settings(summary, this) == wanted:
                    runs.extend(this.get("runs", []))
                elif this.get("runs"):
                    left_out.append(
                        f"{name} {side}: {len(this['runs'])} run(s) of {summary.get('started')} had other settings"
                    )
            merged["sides"][side] = dict(latest["sides"][side], runs=runs)
            merged["figures"][side] = side_figures(runs, side)
        claims.append(merged)
    latest_catalogue = ordered[-1] if ordered else {}
    summary = {key: latest_catalogue.get(key) for key in ("backend", "system", "version", "time_limit_s")}
    summary.update(
        started=ordered[0].get("started") if ordered else None,
        seed=None,
        runs_per_side=None,
        merged_from=[s.get("started") for s in ordered],
        claims=claims,
    )
    return summary, left_out
