"""Netem specs and the on-disk ledger of active faults."""

import json

import pytest

from ground.errors import GregorError
from nemesis.ledger import Ledger, ledger_path
from nemesis.netem import PROFILES, NetemProfile


def test_every_profile_builds_a_netem_spec():
    assert PROFILES["delay"].spec() == "delay 200ms 50ms distribution normal"
    assert PROFILES["reorder"].spec().startswith("delay 50ms") and "reorder 30% 50%" in PROFILES["reorder"].spec()
    assert PROFILES["rate"].spec() == "rate 256kbit"
    assert PROFILES["loss"].spec() == "loss 20%"
    assert PROFILES["duplicate"].spec() == "duplicate 20%"


def test_reorder_without_delay_and_empty_profiles_are_refused():
    with pytest.raises(GregorError, match="reordering needs a delay"):
        NetemProfile("x", reorder_pct=10).spec()
    with pytest.raises(GregorError, match="changes nothing"):
        NetemProfile("x").spec()


def test_ledger_keeps_entries_until_removed_and_survives_a_new_instance(tmp_path):
    ledger = Ledger(tmp_path / "lab-faults.json")
    a = ledger.add({"fault": "kill", "nodes": ["n2"]})
    b = ledger.add({"fault": "pause", "nodes": [], "clients": [{"pid": 1, "starttime": 5}]})
    again = Ledger(tmp_path / "lab-faults.json")  # as the next run would read it
    assert [e["id"] for e in again.entries()] == [a["id"], b["id"]]
    assert json.loads((tmp_path / "lab-faults.json").read_text())[1]["clients"][0]["pid"] == 1
    again.remove(a["id"])
    assert ledger.entries() == [b]
    ledger.remove(b["id"])
    assert not (tmp_path / "lab-faults.json").exists()


def test_ledger_path_is_per_lab(monkeypatch, tmp_path):
    monkeypatch.setenv("GREGOR_STATE_DIR", str(tmp_path))
    assert ledger_path("nem") == tmp_path / "nem-faults.json"
