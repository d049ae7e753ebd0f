"""SSH hosts for the lab tests: containers of the node image running real sshd
(harness/backends/ssh_sandbox.py), started on first use, once per session.

The SSH backend's own tests use them, and so do the nemesis and workload lab
tests when $GREGOR_TEST_BACKENDS names "ssh".
"""

from __future__ import annotations

from backend_params import lab_name

HOSTS = 3


class SshHosts:
    """A lazily started sandbox of HOSTS hosts, removed at the end of the session."""

    def __init__(self, directory):
        self.directory = directory
        self.name = lab_name("ssh")
        self._sandbox = None

    def sandbox(self):
        if self._sandbox is None:
            from harness.backends import ssh_sandbox

            self._sandbox = ssh_sandbox.start(self.name, HOSTS, str(self.directory), progress=print)
        return self._sandbox

    def options(self) -> dict:
        return self.sandbox().options()

    def stop(self) -> None:
        if self._sandbox is not None:
            from harness.backends import ssh_sandbox
            from harness.backends.ssh import close_connections

            close_connections()
            ssh_sandbox.stop(self.name)
            self._sandbox = None
