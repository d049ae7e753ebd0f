"""What `gregor run` makes of argument lists, up to the first write of test.json, as JSON.

Run as a script inside a tree of Gregor (this one, or an older copy) with
that tree on sys.path: it reads a JSON list of argument lists on stdin and
prints, for each, the parsed namespace, the validated configuration, the
topics the run would create, the clients' specs and test.json as first
written, or the one-line error. No lab is started: the lab, its admin
client and the run directory are stand-ins, and the run stops at its first
write of test.json. tests/controller/test_run_config_baseline.py compares
two trees with it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys


class Written(Exception):
    """Raised by the stand-in write_json: the run stops at its first test.json."""

    def __init__(self, test: dict):
        self.test = test


class FakePlace:
    def __init__(self, name: str):
        self.name = name


class FakeAdmin:
    def __init__(self, created: list):
        self.created = created

    def create_topic(self, topic, partitions, replication_factor=None, config=None):
        self.created.append({"topic": topic, "partitions": partitions, "rf": replication_factor, "config": config})


class FakeLab:
    """The parts of a Lab that run() touches before test.json is written."""

    name = "snap"
    version = "9.9.9"
    nodes: list = []
    broker_config: dict = {}
    bootstrap_servers = "n1:9092"

    def __init__(self):
        self.created: list = []

    def admin(self, timeout=None):
        return FakeAdmin(self.created)

    def wait_healthy(self, topics=None, timeout=None):
        pass

    def describe(self):
        return {"system": "kafka", "backend": "local"}

    def client_place(self, name):
        return FakePlace(name)


def plain(value):
    """A configuration as a dict (today's dicts; a dataclass field by field)."""
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return dict(value)


def snapshot(argv: list[str]) -> dict:
    from harness.controller import run, run_cli

    class Raising(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(f"usage: {message}")

    parser = Raising(prog="gregor run")
    run_cli.add_arguments(parser)
    out: dict = {}
    try:
        args = parser.parse_args(argv)
        out["namespace"] = {k: v for k, v in sorted(vars(args).items()) if k != "func"}
        cfg = run_cli.validate(args)
    except Exception as error:  # noqa: BLE001 - the error is the snapshot
        out["error"] = f"{type(error).__name__}: {error}"
        return out
    out["config"] = plain(cfg)
    lab = FakeLab()
    module = run.workload_module(out["config"]["workload"])

    def stop(path, test):
        raise Written(json.loads(json.dumps(test)))

    run.open_lab = lambda cfg: lab
    run.heal_before = lambda lab: None
    run.learn_cluster = lambda lab, cfg: {"api_versions": {}}
    run.new_run_dir = lambda store, name, start: "/nonexistent/20250101T000000.000"
    run.write_json = stop
    try:
        run.run(cfg)
    except Written as written:
        test = written.test
    for key in ("start_time", "start_wall_s", "versions"):
        test.pop(key, None)
    out["test"] = test
    out["client_order"] = list(test["client"])
    out["broker_order"] = list(test["broker"])
    out["topics"] = lab.created
    specs = run.build_specs(cfg, module, test["keys"], lab.bootstrap_servers, 0, 0.0, "rid", lab)
    out["specs"] = [
        {
            f.name: (getattr(s, f.name).name if f.name == "place" and s.place else getattr(s, f.name))
            for f in dataclasses.fields(s)
        }
        for s in specs
    ]
    return out


def main() -> None:
    argvs = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # the run's progress lines
        found = [snapshot(argv) for argv in argvs]
    json.dump(found, sys.stdout, default=repr)


if __name__ == "__main__":
    main()
