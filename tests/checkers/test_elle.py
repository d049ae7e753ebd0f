"""Exports to Jepsen's Kafka EDN and Elle's list-append forms, read back
with our EDN reader; and the `elle` section when no Elle jar is at hand."""

import pytest

from checkers import edn
from checkers.edn import kw
from checkers.elle import elle_command, elle_section, export_jepsen_edn, export_list_append, parse_elle_output
from checkers.load import load

pytestmark = pytest.mark.spark


def history():
    return [
        {"process": 0, "type": "invoke", "f": "assign", "keys": [0, 1]},
        {"process": 0, "type": "ok", "f": "assign", "keys": [0, 1]},
        {
            "process": 1,
            "type": "invoke",
            "f": "txn",
            "txn_id": "t1",
            "mops": [{"f": "send", "key": 0, "value": 10}, {"f": "send", "key": 1, "value": 20}],
        },
        {
            "process": 1,
            "type": "ok",
            "f": "txn",
            "txn_id": "t1",
            "mops": [
                {"f": "send", "key": 0, "value": 10, "offset": 0},
                {"f": "send", "key": 1, "value": 20, "offset": 5},
            ],
        },
        {"process": "nemesis", "type": "invoke", "f": "kill"},
        {"process": "nemesis", "type": "info", "f": "kill", "value": {"killed": ["n2"]}},
        {"process": 2, "type": "invoke", "f": "send", "mops": [{"f": "send", "key": 0, "value": 11}]},
        {"process": 2, "type": "ok", "f": "send", "mops": [{"f": "send", "key": 0, "value": 11, "offset": 2}]},
        {"process": 0, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]},
        {
            "process": 0,
            "type": "ok",
            "f": "poll",
            "mops": [
                {"f": "poll", "key": 0, "offset": 0, "value": 10, "poll": 0},
                {"f": "poll", "key": 0, "offset": 2, "value": 11, "poll": 0},
                {"f": "poll", "key": 1, "offset": 5, "value": 20, "poll": 1},
            ],
        },
        {"process": 3, "type": "invoke", "f": "poll", "mops": [{"f": "poll"}]},
        {
            "process": 3,
            "type": "fail",
            "f": "poll",
            "error": "UNKNOWN_TOPIC",
            "mops": [{"f": "poll", "key": 0, "offset": 0, "value": 10}],
        },
        {"process": 4, "type": "invoke", "f": "commit", "group": "g", "mops": [{"f": "commit", "key": 0, "offset": 3}]},
        {"process": 4, "type": "ok", "f": "commit", "group": "g", "mops": [{"f": "commit", "key": 0, "offset": 3}]},
        {"process": 5, "type": "invoke", "f": "send", "mops": [{"f": "send", "key": 1, "value": 21}]},
    ]


def loaded(spark, tmp_path, write_run):
    return load(write_run(tmp_path / "run", history()), spark)


def read_back(path):
    return list(edn.iter_history(str(path)))


def test_jepsen_form_reads_back_op_for_op(spark, tmp_path, write_run):
    t = loaded(spark, tmp_path, write_run)
    out = tmp_path / "history.edn"
    assert export_jepsen_edn(t, out) == 13  # the commit op's two lines are left out
    ops = read_back(out)
    assert [o[kw("index")] for o in ops] == list(range(13))

    def by(i):
        return {k.name: v for k, v in ops[i].items() if k.name != "index"}

    assert by(0) == {"type": kw("invoke"), "f": kw("assign"), "process": 0, "time": 0, "value": [0, 1]}
    assert by(2)["value"] == [[kw("send"), 0, 10], [kw("send"), 1, 20]]
    assert by(3) == {
        "type": kw("ok"),
        "f": kw("txn"),
        "process": 1,
        "time": 3000,
        "value": [[kw("send"), 0, [0, 10]], [kw("send"), 1, [5, 20]]],
    }
    assert by(4) == {"type": kw("info"), "f": kw("kill"), "process": kw("nemesis"), "time": 4000}
    assert by(5)["value"] == {"killed": ["n2"]} and by(5)["type"] == kw("info")
    assert by(8)["value"] == [[kw("poll")]]
    assert by(9)["value"] == [[kw("poll"), {0: [[0, 10], [2, 11]]}], [kw("poll"), {1: [[5, 20]]}]]
    assert by(11)["type"] == kw("fail") and by(11)["error"] == "UNKNOWN_TOPIC"
    assert by(12) == {
        "type": kw("invoke"),
        "f": kw("send"),
        "process": 5,
        "time": 14000,
        "value": [[kw("send"), 1, 21]],
    }  # cut short: no completion


def test_list_append_form_reads_prefixes_of_the_log(spark, tmp_path, write_run):
    t = loaded(spark, tmp_path, write_run)
    out = tmp_path / "list-append.edn"
    assert export_list_append(t, out) == 9
    ops = read_back(out)
    assert [o[kw("index")] for o in ops] == list(range(9))
    assert all(o[kw("f")] == kw("txn") for o in ops)
    values = [(o[kw("type")].name, o[kw("process")], o[kw("value")]) for o in ops]
    A, R = kw("append"), kw("r")
    assert values == [
        ("invoke", 1, [[A, 0, 10], [A, 1, 20]]),
        ("ok", 1, [[A, 0, 10], [A, 1, 20]]),
        ("invoke", 2, [[A, 0, 11]]),
        ("ok", 2, [[A, 0, 11]]),
        ("invoke", 0, [[R, 0, None], [R, 1, None]]),
        # the key's log up to the highest offset read; offsets gap 0 -> 2 is ignored
        ("ok", 0, [[R, 0, [10, 11]], [R, 1, [20]]]),
        ("invoke", 3, [[R, 0, None]]),
        ("fail", 3, [[R, 0, None]]),  # reads of a fail op are not reads
        ("invoke", 5, [[A, 1, 21]]),
    ]


def test_without_a_jar_the_section_says_why(spark, tmp_path, write_run, monkeypatch):
    t = loaded(spark, tmp_path, write_run)
    monkeypatch.delenv("GREGOR_ELLE_JAR", raising=False)
    section = elle_section(t, tmp_path)
    assert section == {"available": False, "reason": "no Elle jar configured (--elle-jar or GREGOR_ELLE_JAR)"}
    missing = elle_section(t, tmp_path, elle_jar=str(tmp_path / "elle-cli.jar"))
    assert missing["available"] is False and "does not exist" in missing["reason"]
    assert not (tmp_path / "elle-list-append.edn").exists()


def test_elle_command_line_follows_elle_cli():
    command = elle_command("/opt/elle-cli.jar", "/run/elle-list-append.edn")
    assert command[:4] == ["java", "-Xmx512m", "-jar", "/opt/elle-cli.jar"]
    assert command[command.index("--model") + 1] == "list-append"
    assert command[command.index("--output") + 1] == "json"
    assert command[-1] == "/run/elle-list-append.edn"


def test_elle_json_analysis_is_summarised():
    stdout = (
        "INFO elle: checking\n"
        '{"valid?": false, "anomaly-types": ["G1c", "duplicate-elements"],\n'
        ' "anomalies": {"G1c": [{"cycle": [1, 2]}, {"cycle": [3, 4]}],\n'
        '               "duplicate-elements": [{"key": 0}]},\n'
        ' "not": ["G1c"]}\n'
    )
    parsed = parse_elle_output(stdout)
    assert parsed["valid"] is False
    assert parsed["anomaly_types"] == ["G1c", "duplicate-elements"]
    assert parsed["anomalies"]["G1c"] == {"count": 2, "examples": [{"cycle": [1, 2]}, {"cycle": [3, 4]}]}
    assert parsed["anomalies"]["duplicate-elements"]["count"] == 1
