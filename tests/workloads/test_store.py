"""The store: one directory per run, store/latest points at the newest."""

import json
import os

from workloads.store import new_run_dir, write_json


def test_latest_points_at_the_newest_run_even_in_the_same_second(tmp_path):
    first = new_run_dir(str(tmp_path), "t", start_wall=1_700_000_000)
    second = new_run_dir(str(tmp_path), "t", start_wall=1_700_000_000)
    assert first != second
    assert os.path.realpath(tmp_path / "latest") == os.path.realpath(second)
    assert not os.path.isabs(os.readlink(tmp_path / "latest"))


def test_json_is_replaced_whole(tmp_path):
    path = str(tmp_path / "test.json")
    write_json(path, {"a": 1})
    write_json(path, {"a": 2})
    assert json.load(open(path)) == {"a": 2}
    assert not os.path.exists(path + ".tmp")
