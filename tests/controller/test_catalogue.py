"""The guarantee catalogue as data: every entry is valid `gregor run` options,
a bad entry is refused in one line, and runs are judged by the contract
(detection on the unsafe side, no bad anomaly on the safe side)."""

import textwrap

import pytest

from ground.errors import GregorError
from harness.controller import catalogue

GOOD = """
[[claim]]
name = "demo-claim"
promise = "Safe keeps it; unsafe breaks it."
expected = ["lost-write", "unseen"]
lab = { "replica.lag.time.max.ms" = "5000" }
[claim.run]
workload = "queue"
keys = 2
client-netns = true
nemesis = "kill"
nemesis-targets = "leader"
[claim.unsafe]
acks = "1"
idempotence = "false"
[claim.safe]
acks = "all"
topic-config = ["flush.messages=1", "retention.ms=-1"]
"""


def write(tmp_path, text):
    path = tmp_path / "claims.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_every_claim_of_the_shipped_catalogue_is_valid_and_has_both_sides():
    claims = catalogue.load()
    assert len(claims) >= 13
    names = {c.name for c in claims}
    for wanted in (
        "acks",
        "min-isr",
        "unclean-election",
        "replication-factor",
        "idempotence",
        "in-flight-order",
        "producer-restart",
        "read-committed",
        "zombie-fencing",
        "eos-commit-after",
        "eos-commit-before",
        "auto-commit",
        "hanging-transaction",
        "power-loss",
    ):
        assert wanted in names
    for claim in claims:
        assert claim.promise and claim.expected
        for side in catalogue.SIDES:
            assert catalogue.check_run_options(claim, side).workload


def test_an_entry_becomes_gregor_run_arguments_side_over_shared(tmp_path):
    claim = catalogue.load(write(tmp_path, GOOD))[0]
    argv = claim.run_arguments("safe", seed=7, time_limit=20)
    assert argv[:2] == ["--workload", "queue"] and "--client-netns" in argv
    assert argv[argv.index("--acks") + 1] == "all"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--topic-config"] == ["flush.messages=1", "retention.ms=-1"]
    assert argv[argv.index("--seed") + 1] == "7" and argv[argv.index("--time-limit") + 1] == "20"
    assert claim.run_arguments("unsafe", seed=7)[claim.run_arguments("unsafe", 7).index("--acks") + 1] == "1"
    assert claim.lab == {"replica.lag.time.max.ms": "5000"}


def test_a_claim_may_pin_its_client_and_the_others_run_on_the_catalogues(tmp_path):
    from harness.controller.scenarios import Catalogue

    claims = catalogue.load(
        write(
            tmp_path,
            GOOD
            + GOOD.replace("demo-claim", "java-claim").replace(
                'workload = "queue"', 'workload = "queue"\nclient = "java"'
            ),
        )
    )
    assert [c.client("safe", "librdkafka") for c in claims] == ["librdkafka", "java"]
    run = Catalogue(claims, 1, 1, 10, str(tmp_path / "store"), "gscen", client="java", client_version="4.3.1")
    assert run.client_arguments(claims[0], "safe") == ["--client", "java", "--client-version", "4.3.1"]
    assert run.client_arguments(claims[1], "safe") == []  # pinned: its own --client is in its arguments
    assert claims[1].run_arguments("safe", 1).count("--client") == 1
    assert run.summary["claims"][1]["sides"]["unsafe"]["client"] == "java"


@pytest.mark.parametrize(
    "change, message",
    [
        (('acks = "1"', 'acks = "2"'), "invalid choice"),
        (('expected = ["lost-write", "unseen"]', "expected = []"), "non-empty list"),
        (("keys = 2", 'keys = 2\nlab = "x"'), "lab"),
        (('acks = "1"', 'acks = "1"\nseed = 3'), "--seed"),
        (('name = "demo-claim"', 'name = "Demo Claim"'), "lower-case"),
        (('nemesis = "kill"', 'nemesis = "explode"'), "explode"),
        (('promise = "Safe keeps it; unsafe breaks it."', 'promis = "x"'), "unknown field"),
        (("keys = 2", "keys = 2\nkeys-per-topic = 3"), "claim 'demo-claim': run: unknown option --keys-per-topic"),
        (('acks = "1"', 'acks = "1"\nfast = true'), "claim 'demo-claim': unsafe: unknown option --fast"),
        (("client-netns = true", 'client-netns = "yes"'), "claim 'demo-claim': run: client-netns is a switch"),
        (('nemesis = "kill"', 'nemesis = ["kill"]'), "nemesis takes one value"),
    ],
)
def test_a_bad_entry_is_refused_in_one_line_naming_the_claim(tmp_path, change, message):
    with pytest.raises(GregorError, match=message) as error:
        catalogue.load(write(tmp_path, GOOD.replace(*change)))
    assert "\n" not in str(error.value)


def test_select_by_name_and_unknown_names():
    claims = catalogue.load()
    assert [c.name for c in catalogue.select(claims, "power-loss,acks")] == ["acks", "power-loss"]
    with pytest.raises(GregorError, match="no claim named 'nope'"):
        catalogue.select(claims, "acks,nope")


def anomaly(count, allowed, *times):
    return {
        "count": count,
        "allowed": allowed,
        "why_allowed": "acks=1" if allowed else None,
        "examples": [{"time_s": t} for t in times],
    }


def test_the_unsafe_side_detects_with_an_expected_anomaly_and_times_the_first(tmp_path):
    claim = catalogue.load(write(tmp_path, GOOD))[0]
    results = {
        "verdict": "valid",
        "anomalies": {"lost-write": anomaly(3, True, 12.5, 30.0), "duplicate": anomaly(2, True, 4.0)},
    }
    judged = catalogue.judge(claim, "unsafe", results, {"drain": {"complete": True}})
    assert judged["detected"] and judged["expected_found"] == ["lost-write"]
    assert judged["first_s"] == 12.5  # the duplicate at 4 s is not what the claim is about
    assert judged["clean"] and judged["bad"] == []


def test_unseen_counts_only_after_a_complete_drain(tmp_path):
    claim = catalogue.load(write(tmp_path, GOOD))[0]
    results = {"anomalies": {"unseen": anomaly(5, True, 20.0)}}
    assert not catalogue.judge(claim, "unsafe", results, {"drain": {"complete": False}})["detected"]
    assert catalogue.judge(claim, "unsafe", results, {"drain": {"complete": True}})["detected"]


def test_a_bad_anomaly_on_the_safe_side_is_a_finding_and_permitted_ones_are_not(tmp_path):
    claim = catalogue.load(write(tmp_path, GOOD))[0]
    judged = catalogue.judge(
        claim, "safe", {"anomalies": {"duplicate": anomaly(4, True, 3.0), "lost-write": anomaly(1, False, 41.0)}}, {}
    )
    assert not judged["clean"] and judged["bad"] == ["lost-write"] and judged["first_s"] == 41.0
    assert catalogue.judge(claim, "safe", {"anomalies": {"duplicate": anomaly(4, True)}}, {})["clean"]


def test_side_figures_count_hits_errors_and_the_median_time():
    runs = [
        {
            "error": None,
            "detected": True,
            "clean": True,
            "first_s": 10.0,
            "anomalies": {"lost-write": {"count": 2, "allowed": True}},
        },
        {
            "error": None,
            "detected": True,
            "clean": True,
            "first_s": 30.0,
            "anomalies": {"lost-write": {"count": 1, "allowed": True}},
        },
        {"error": None, "detected": False, "clean": True, "first_s": None, "anomalies": {}},
        {"error": "gregor run exited 2"},
    ]
    figures = catalogue.side_figures(runs, "unsafe")
    assert (figures["runs"], figures["completed"], figures["errors"], figures["hits"]) == (4, 3, 1, 2)
    assert figures["median_first_s"] == 20.0
    assert figures["anomalies"]["lost-write"]["count"] == 3 and figures["anomalies"]["lost-write"]["runs"] == 2
    assert catalogue.side_figures(runs, "safe")["hits"] == 0


def _catalogue(started, argv, runs, version=None):
    side = {"arguments": argv, "runs": runs}
    return {
        "started": started,
        "backend": "local",
        "system": "kafka",
        "version": version,
        "time_limit_s": 60.0,
        "claims": [{"name": "acks", "promise": "p", "sides": {"unsafe": side, "safe": dict(side, runs=[])}}],
    }


def test_merged_catalogues_count_runs_of_the_newest_settings_only():
    hit = {"error": None, "detected": True, "clean": True, "first_s": 5.0, "anomalies": {}}
    miss = {"error": None, "detected": False, "clean": True, "first_s": None, "anomalies": {}}
    old = _catalogue("2026-11-01T00:00:00Z", ["--acks", "1", "--seed", "1"], [hit, hit])
    other = _catalogue("2026-11-02T00:00:00Z", ["--acks", "0", "--seed", "3"], [miss])
    new = _catalogue("2026-11-03T00:00:00Z", ["--acks", "1", "--seed", "9"], [miss])
    newer_version = _catalogue("2026-11-04T00:00:00Z", ["--acks", "1", "--seed", "9"], [hit], version="4.4.0")
    summary, left_out = catalogue.merge([new, old, other])
    figures = summary["claims"][0]["figures"]["unsafe"]
    assert (figures["completed"], figures["hits"]) == (3, 2)
    assert left_out == ["acks unsafe: 1 run(s) of 2026-11-02T00:00:00Z had other settings"]
    summary, left_out = catalogue.merge([new, newer_version])
    assert summary["claims"][0]["figures"]["unsafe"]["hits"] == 1 and summary["version"] == "4.4.0"
    assert len(left_out) == 1


PINNED = """
[claim.system.unsafe]
version = "3.9.1"
[claim.system.safe]
version = "4.4.0"
transaction-version = 2
"""


def test_a_claim_may_pin_each_sides_release_and_then_its_sides_run_on_labs_of_their_own(tmp_path):
    from harness.controller.scenarios import Catalogue

    claims = catalogue.load(write(tmp_path, GOOD + PINNED))
    claim = claims[0]
    assert claim.side_system("safe") == {"version": "4.4.0", "transaction-version": 2}
    assert not claim.sides_share_a_lab()
    assert catalogue.load(write(tmp_path, GOOD))[0].sides_share_a_lab()
    run = Catalogue(claims, 1, 1, 10, str(tmp_path / "store"), "gscen", version="4.3.1")
    assert run.version_of(claim, "unsafe") == "3.9.1" and run.version_of(claim, "safe") == "4.4.0"
    assert run.summary["claims"][0]["sides"]["safe"]["system"]["transaction-version"] == 2


@pytest.mark.parametrize(
    "pinned, message",
    [
        ('[claim.system.both]\nversion = "3.9.1"\n', "system holds a table per side"),
        ("[claim.system.safe]\nnodes = 5\n", "system.safe may pin only broker-config, transaction-version, version"),
        ("[claim.system.safe]\nversion = 391\n", "system.safe.version must be a str"),
        ('[claim.system.safe]\nbroker-config = "a=b"\n', "system.safe.broker-config must be a list"),
        (
            '[claim.system.unsafe]\nbroker-config = ["transaction.partition.verification.enable"]\n',
            "system.unsafe.broker-config: bad entry 'transaction.partition.verification.enable': use key=value",
        ),
        ("[claim.system.unsafe]\nbroker-config = [3]\n", "system.unsafe.broker-config: bad entry 3: use key=value"),
    ],
)
def test_a_bad_pinned_side_is_refused_in_one_line(tmp_path, pinned, message):
    with pytest.raises(GregorError, match=message):
        catalogue.load(write(tmp_path, GOOD + pinned))


def test_a_side_names_the_lab_it_pins(tmp_path):
    """The catalogue page shows each side's settings (describe_side): a pinned Kafka
    version and transaction.version are part of them."""
    pinned = (
        '[claim.system.unsafe]\nversion = "3.9.1"\n[claim.system.safe]\nversion = "4.4.0"\ntransaction-version = 2\n'
    )
    claim = catalogue.load(write(tmp_path, GOOD + pinned))[0]
    assert claim.describe_side("unsafe") == "Kafka 3.9.1, acks=1, idempotence=false"
    assert claim.describe_side("safe").startswith("Kafka 4.4.0, transaction.version=2")


SIDE_BROKER_CONFIG = """
[claim.system.unsafe]
broker-config = ["transaction.partition.verification.enable=false", "replica.lag.time.max.ms=7000"]
"""


def test_a_sides_broker_config_goes_over_the_claims_lab_settings_into_that_sides_lab(tmp_path, monkeypatch):
    from harness import lab as lab_module
    from harness.controller.scenarios import Catalogue

    claim = catalogue.load(write(tmp_path, GOOD + SIDE_BROKER_CONFIG))[0]
    assert not claim.sides_share_a_lab()
    assert claim.side_broker_config("unsafe") == {
        "replica.lag.time.max.ms": "7000",
        "transaction.partition.verification.enable": "false",
    }
    assert claim.side_broker_config("safe") == {"replica.lag.time.max.ms": "5000"}
    assert claim.describe_side("unsafe") == (
        "acks=1, idempotence=false, broker transaction.partition.verification.enable=false, "
        "broker replica.lag.time.max.ms=7000"
    )

    brought_up = []

    class Lab:
        @staticmethod
        def attach(name, backend):
            raise GregorError("no lab")

        @staticmethod
        def down(name, progress, backend):
            pass

        @staticmethod
        def up(**options):
            brought_up.append(options["broker_overrides"])

    monkeypatch.setattr(lab_module, "Lab", Lab)
    run = Catalogue([claim], 1, 1, 10, str(tmp_path / "store"), "gscen", progress=lambda message: None)
    run.lab_for(claim, "unsafe")
    run.lab_for(claim, "safe")
    assert brought_up == [claim.side_broker_config("unsafe"), {"replica.lag.time.max.ms": "5000"}]
