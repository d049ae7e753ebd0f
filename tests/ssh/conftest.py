"""Fixtures of the SSH backend's tests: real sshd in containers of the node image."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def sandbox(ssh_hosts):
    if os.geteuid() != 0:
        pytest.skip("the SSH hosts are containers and the client places namespaces: root needed")
    return ssh_hosts.sandbox()
