"""The EDN reader reads every form Jepsen and Elle histories use, streams
large files, and round-trips what the writer writes."""

import io
from decimal import Decimal
from fractions import Fraction

import pytest

from checkers import edn
from checkers.edn import Symbol, Tagged, kw


def test_scalars_read_as_python_values():
    assert edn.loads("nil") is None
    assert edn.loads("true") is True and edn.loads("false") is False
    assert edn.loads("-42") == -42
    assert edn.loads("123456789012345678901234567890N") == 123456789012345678901234567890
    assert edn.loads("1.5") == 1.5 and edn.loads("-2e3") == -2000.0
    assert edn.loads("1.25M") == Decimal("1.25")
    assert edn.loads("1/64") == Fraction(1, 64)
    assert edn.loads(":send") == kw("send")
    assert edn.loads(":jepsen.history/op") == kw("jepsen.history/op")
    assert edn.loads("foo/bar") == Symbol("foo/bar")
    assert edn.loads(r"\newline") == "\n" and edn.loads(r"\a") == "a"
    assert edn.loads("##Inf") == float("inf")


def test_strings_unescape():
    assert edn.loads(r'"a\"b\\c\nd\te\u00e9"') == 'a"b\\c\nd\te\u00e9'


def test_collections_keep_their_kind():
    value = edn.loads("{:v [1 (2 3) #{4 5}], [1 2] :vector-key}")
    assert value == {kw("v"): [1, (2, 3), frozenset({4, 5})], (1, 2): kw("vector-key")}


def test_records_read_as_maps_and_other_tags_are_kept():
    assert edn.loads("#jepsen.history.Op{:index 3, :f :send}") == {kw("index"): 3, kw("f"): kw("send")}
    assert edn.loads('#inst "2024-01-01"') == Tagged("inst", "2024-01-01")


def test_comments_and_discard_are_skipped():
    text = "; a comment\n[1 #_ 2 #_ [nested 3] 4] ; trailing"
    assert edn.loads(text) == [1, 4]


def test_top_level_forms_stream_one_at_a_time():
    forms = edn.iter_forms(io.StringIO("{:a 1}\n{:b 2}\n"))
    assert next(forms) == {kw("a"): 1}
    assert next(forms) == {kw("b"): 2}
    assert list(forms) == []


def test_history_in_one_vector_or_as_a_stream_of_maps(tmp_path):
    as_vector = tmp_path / "v.edn"
    as_vector.write_text("[{:index 0} {:index 1}]")
    as_stream = tmp_path / "s.edn"
    as_stream.write_text("{:index 0}\n{:index 1}\n")
    expected = [{kw("index"): 0}, {kw("index"): 1}]
    assert list(edn.iter_history(str(as_vector))) == expected
    assert list(edn.iter_history(str(as_stream))) == expected


def test_forms_crossing_the_read_window_are_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(edn, "_WINDOW", 7)
    path = tmp_path / "h.edn"
    long_string = "x" * 50 + '\\"' + "y" * 30
    path.write_text('{:value "%s" :n 1234567890123}\n{:k :keyword-longer-than-window}' % long_string)
    forms = list(edn.iter_history(str(path)))
    assert forms[0] == {kw("value"): "x" * 50 + '"' + "y" * 30, kw("n"): 1234567890123}
    assert forms[1] == {kw("k"): kw("keyword-longer-than-window")}


def test_writer_round_trips():
    value = {
        kw("type"): kw("ok"),
        kw("value"): [[kw("send"), 3, [12, 7]], [kw("poll"), {1: [[0, 5], [1, 6]]}]],
        kw("s"): 'quote " and \\ and\nnewline',
        kw("set"): frozenset({1, 2}),
        kw("l"): (1, None, True, False),
        kw("f"): 2.5,
    }
    assert edn.loads(edn.dumps(value)) == value


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1 2", "input ends"),
        ("{:a}", "even number"),
        ("[1 2)", "unexpected ')'"),
        ('"unterminated', "cannot read"),
        ("12abc", "cannot read"),
    ],
)
def test_malformed_input_gets_a_one_line_error_with_the_line(text, problem):
    with pytest.raises(edn.EdnError) as error:
        edn.loads("\n" + text)
    assert problem in str(error.value)
    assert "line 2" in str(error.value)
    assert "\n" not in str(error.value)
