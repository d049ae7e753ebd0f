"""What the host lists is read from the tools' JSON (ip -j, findmnt --json), not
from their text: names with spaces, tabs or '@' come back whole."""

from __future__ import annotations

import subprocess

from harness.backends import netns
from harness.backends.local import mounts_under
from lab.helpers import needs_root


@needs_root
def test_mount_points_with_spaces_and_tabs_come_back_decoded(tmp_path):
    names = [tmp_path / "with space", tmp_path / "with\ttab", tmp_path / "plain" / "deeper"]
    mounted = []
    try:
        for path in names:
            path.mkdir(parents=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "gtest", str(path)], check=True)
            mounted.append(path)
        assert mounts_under(tmp_path) == sorted((str(p) for p in names), key=len, reverse=True)
        assert mounts_under(tmp_path / "plain") == [str(tmp_path / "plain" / "deeper")]
    finally:
        for path in reversed(mounted):
            subprocess.run(["umount", "-l", str(path)], check=False)
    assert mounts_under(tmp_path) == []


@needs_root
def test_namespaces_links_and_routes_are_listed_from_ip_json():
    lab, member = "gjsn", "n1"
    name = netns.ns_name(lab, member)
    try:
        netns.create_bridge(lab, "10.249.7.1", 24)
        netns.create_member(lab, member, "10.249.7.11", 24, gateway=None)
        assert name in netns.namespaces()
        assert netns.host_veth(lab, member) in netns.links_with_prefix(f"{lab}-")
        assert netns.subnet_in_use(netns.ipaddress.IPv4Network("10.249.7.0/24"), except_dev="none") == (
            netns.bridge_name(lab)
        )
        route = netns.route_to("10.249.7.11")
        assert route["dev"] == netns.bridge_name(lab) and route["prefsrc"] == "10.249.7.1"
        assert netns.route_to("not-an-address") == {}
    finally:
        netns.delete_member(lab, member)
        netns.delete_bridge(lab)
    assert name not in netns.namespaces()
    assert netns.links_with_prefix(f"{lab}-") == []
