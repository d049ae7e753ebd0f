"""The varint codec under the two hand-spoken Kafka requests."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from harness.systems.kafka_codec import read_uvarint as _read_uvarint
from harness.systems.kafka_codec import uvarint as _uvarint


@given(st.integers(min_value=0, max_value=2**35))
def test_unsigned_varints_round_trip(value):
    assert _read_uvarint(io.BytesIO(_uvarint(value))) == value


def test_small_varints_are_one_byte():
    assert _uvarint(0) == b"\x00" and _uvarint(127) == b"\x7f" and _uvarint(128) == b"\x80\x01"
