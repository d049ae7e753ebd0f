"""`gregor check DIR`: exit codes, the printed summary, and histories that must not raise false alarms.

Named test_check_cli.py (not test_cli.py) so its module name cannot clash
with another package's CLI tests in the same pytest run.
"""

from __future__ import annotations

import json

import pytest
from checker_histories import History, poll, send

from checkers import cli as check_cli
from harness.cli import main


def clean_history(cut_short: bool) -> History:
    """Offset gaps from transaction markers, an info send no one read, values
    read by fail ops and (optionally) an invoke with no completion: no anomaly."""
    h = History()
    h.op(0, "txn", [send(0, 1, 0), send(0, 2, 1)], txn_id="a", commit_time=0)
    h.nemesis("kill", {"killed": ["n2"]})
    h.op(0, "txn", [send(0, 3, 3), send(0, 4, 4)], txn_id="a", commit_time=0)  # offset 2: a marker
    h.op(1, "poll", [poll(0, 0, 1), poll(0, 1, 2), poll(0, 3, 3), poll(0, 4, 4)])
    h.op(2, "poll", [poll(0, 0, 1), poll(0, 1, 2)])
    h.op(2, "poll", [poll(0, 3, 3), poll(0, 4, 4)])
    h.nemesis("start", {"started": ["n2"]})
    h.op(3, "send", [send(1, 5)], type="info", error="_MSG_TIMED_OUT")  # no one read it
    h.op(4, "send", [send(2, 6)], type="fail", error="NOT_ENOUGH_REPLICAS")
    h.op(5, "poll", [poll(2, 0, 6)], type="fail", error="COORDINATOR_LOAD")  # read by a fail op only
    h.op(4, "send", [send(2, 7, 1)])
    h.op(5, "poll", [poll(2, 1, 7)])
    if cut_short:
        h.invoke(6, "send", [send(3, 8)])
        h.invoke(7, "poll", [{"f": "poll"}])
    return h


@pytest.mark.spark
def test_cut_short_clean_history_is_unknown_exit_3_with_no_anomaly(spark, tmp_path, capsys):
    run = clean_history(cut_short=True).write(tmp_path)
    assert main(["check", str(run)]) == 3
    out = capsys.readouterr().out
    assert "verdict: unknown" in out and "cut short" in out
    assert f"results: {run}/results.json" in out
    result = json.loads((run / "results.json").read_text())
    assert result["anomalies"] == {} and result["cut_short"] is True
    assert result["stats"]["info"] == 3


@pytest.mark.spark
def test_complete_clean_history_is_valid_exit_0(spark, tmp_path, capsys):
    run = clean_history(cut_short=False).write(tmp_path)
    assert main(["check", str(run), "--examples", "3", "--spark-conf", "spark.sql.shuffle.partitions=2"]) == 0
    out = capsys.readouterr().out
    assert "verdict: valid" in out
    size = (run / "history.jsonl").stat().st_size / 2**20
    assert out.index(f"  loading {size:,.1f} MiB of history") < out.index("  load: ")  # said before the long step
    result = json.loads((run / "results.json").read_text())
    assert result["verdict"] == "valid" and result["anomalies"] == {}
    assert result["nemesis"][0]["label"] == "kill n2"


def test_invalid_result_exits_1_and_prints_permissions(monkeypatch, tmp_path, capsys):
    # A fake check (unit test of the CLI module alone): the exit code follows the verdict.
    run = clean_history(cut_short=False).write(tmp_path)
    fake = {
        "verdict": "invalid",
        "verdict_reasons": ["bad anomalies: lost-write"],
        "anomalies": {
            "lost-write": {"count": 2, "allowed": False, "why_allowed": None},
            "duplicate": {"count": 312, "allowed": True, "why_allowed": "enable.idempotence=false"},
        },
        "stats": {"ops": 10, "ok": 9, "info": 1, "fail": 0},
        "checker": {"seconds": 1.0},
    }
    monkeypatch.setattr("checkers.cli.get_spark", lambda master=None, conf=None, **_: None)
    monkeypatch.setattr("checkers.cli.check_dir", lambda *a, **k: fake)
    assert main(["check", str(run)]) == 1
    out = capsys.readouterr().out
    assert "duplicate: 312, permitted because enable.idempotence=false" in out
    assert "lost-write: 2, bad" in out


def test_missing_test_json_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text("")
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gregor: error:") and "test.json not found" in err and "\n" not in err
    assert not (tmp_path / "results.json").exists()


def test_bad_spark_conf_exits_2(tmp_path, capsys):
    clean_history(cut_short=False).write(tmp_path)
    assert main(["check", str(tmp_path), "--spark-conf", "no-equals-sign"]) == 2
    assert "key=value" in capsys.readouterr().err


def test_exit_codes_are_documented():
    assert check_cli.EXIT_CODES == {"valid": 0, "invalid": 1, "unknown": 3}


def test_check_dir_releases_the_checkpoints_it_made(spark, tmp_path, write_run):
    """A long-lived session checking many runs must not keep every run's data."""
    from checkers.check import check_dir

    h = History()
    h.op(0, "send", [send(0, 1, 0)])
    h.op(1, "poll", [poll(0, 0, 1)])
    run = write_run(tmp_path, h.events)
    before = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    assert check_dir(run, spark=spark, progress=lambda message: None)["verdict"] == "valid"
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= before


def test_the_checks_time_counts_its_load(spark, tmp_path, write_run, monkeypatch):
    """results.json's checker.seconds is the whole check, the load included
    (load_seconds of it): the load is most of a large check."""
    import time

    from checkers import check

    h = History()
    h.op(0, "send", [send(0, 1, 0)])
    h.op(1, "poll", [poll(0, 0, 1)])
    run = write_run(tmp_path, h.events)
    real_load = check.load

    def slow_load(*args, **kwargs):
        time.sleep(2)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(check, "load", slow_load)
    result = check.check_dir(run, spark=spark, progress=lambda message: None)
    timing = result["checker"]
    assert timing["load_seconds"] >= 2
    assert timing["seconds"] > timing["load_seconds"]
    assert timing["events_per_s"] == round(result["stats"]["events"] / timing["seconds"], 1)
    written = json.loads((run / "results.json").read_text())["checker"]
    assert written["seconds"] == timing["seconds"] and written["load_seconds"] == timing["load_seconds"]


def test_a_finder_failing_on_its_lane_fails_the_check_and_leaves_nothing_behind(
    spark, tmp_path, write_run, monkeypatch
):
    """The finders run on two lanes at once: an error on one is the check's
    error, after the other lane has ended; no results.json, no lane thread,
    no persisted table is left."""
    import threading

    from checkers import check, cycles, stats

    h = History()
    h.op(0, "send", [send(0, 1, 0)])
    h.op(1, "poll", [poll(0, 0, 1)])
    run = write_run(tmp_path, h.events)
    other_lane_ended = threading.Event()

    def failing(t, *args):
        raise RuntimeError("cycle search failed")

    def stats_then_mark(t):
        try:
            return real_stats(t)
        finally:
            other_lane_ended.set()

    real_stats = stats.compute_stats
    monkeypatch.setattr(cycles, "cycle_rows", failing)
    monkeypatch.setattr(check, "compute_stats", stats_then_mark)
    before = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    with pytest.raises(RuntimeError, match="cycle search failed"):
        check.check_dir(run, spark=spark, progress=lambda message: None)
    assert other_lane_ended.is_set()
    assert not (run / "results.json").exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("gregor-check")]
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= before
