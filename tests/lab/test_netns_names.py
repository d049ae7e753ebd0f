"""Names and subnets of labs: valid Linux names, one private /24 per lab."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ground.errors import GregorError
from harness.backends import netns

lab_names = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
member_names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@given(lab_names, member_names)
def test_every_interface_name_fits_the_kernel_limit(lab, member):
    for name in (netns.bridge_name(lab), netns.host_veth(lab, member)):
        assert len(name) <= 15


@given(lab_names)
def test_a_lab_subnet_is_a_private_slash_24(lab):
    subnet = netns.lab_subnet(lab)
    assert subnet.prefixlen == 24
    assert subnet.subnet_of(ipaddress.IPv4Network("10.128.0.0/9"))


def test_the_names_used_side_by_side_get_different_subnets():
    names = ["gregor", "labt", "labc", "labi", "labk", "labb", "wl", "nem"]
    assert len({netns.lab_subnet(n) for n in names}) == len(names)


@pytest.mark.parametrize("bad", ["", "Gregor", "1lab", "lab-x", "waytoolongname"])
def test_bad_lab_names_are_refused(bad):
    with pytest.raises(GregorError, match="bad lab name"):
        netns.check_lab_name(bad)
