"""Taking a lab's namespaces down ends whatever still runs in them: a server
a test or a user started by hand inside a node's namespace would otherwise
outlive the namespace, unreachable, with no lab left to stop it."""

import os
import subprocess
import time

import pytest
from backend_params import lab_name

from harness.backends.bridge_places import remove_namespaces

pytestmark = pytest.mark.lab


def test_removing_a_labs_namespaces_kills_the_processes_left_in_them():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    lab = lab_name("gstray")
    ns = f"{lab}-n1"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        stray = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"], start_new_session=True)
        deadline = time.monotonic() + 10
        while not subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            assert time.monotonic() < deadline, "the stray never started"
            time.sleep(0.05)
        assert remove_namespaces(lab) == 1
        assert stray.wait(timeout=10) == -9
        assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
