"""One SSH connection per host, through paramiko, reused by every call.

Why our own small layer over paramiko's Transport rather than SSHClient:
the host key is checked by rules we state (known_hosts, or the key a
Vagrant lab made for that machine; anything else only with an explicit
--insecure-host-keys), only the key the user named is offered, and every
way a login can fail becomes one line that names the node and the host and
says what to do. A connection that was up and is lost is opened again and
the command retried; one that cannot be opened is reported, never skipped.

Secrets never leave this module: a key is read from its file and kept in
memory; messages name the file, never its content.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass

from ground.errors import GregorError
from harness.backends.ssh_hosts import SshHost

CONNECT_TIMEOUT_S = 10
RECONNECT_ATTEMPTS = 3  # after a connection that was up is lost
RECONNECT_PAUSE_S = 1.0
KEEPALIVE_S = 15
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")

# paramiko's transport thread logs what it also raises to us, tracebacks
# included; without a handler Python would print them on the terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class Trust:
    """How host keys are checked: a known_hosts file, or not at all (opt-in)."""

    known_hosts: str
    insecure: bool = False

    def describe(self, hosts) -> str:
        """How these hosts' keys are checked, in words for the report."""
        if self.insecure:
            return "NOT verified (--insecure-host-keys)"
        own = [h for h in hosts if h.host_key]
        if own and len(own) == len(hosts):
            return "verified against the keys the Vagrant lab made for its machines"
        return f"verified against {self.known_hosts}" + (" and the Vagrant lab's own keys" if own else "")


def default_known_hosts() -> str:
    return os.path.expanduser("~/.ssh/known_hosts")


class LostConnection(Exception):
    """The connection went away in the middle of a command."""


def fingerprint(key) -> str:
    """OpenSSH's SHA256 fingerprint of a host key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: SshHost) -> str:
    return host.host if host.port == 22 else f"[{host.host}]:{host.port}"


class Connection:
    """The one SSH connection to a host: opened on first use, opened again
    when lost; thread-safe (the nemesis and the controller share it)."""

    def __init__(self, host: SshHost, trust: Trust, label: str):
        self.host = host
        self.trust = trust
        self.label = label  # "n1 (root@10.0.0.2:22)" in every message
        self._lock = threading.RLock()
        self._transport = None
        self._sftp = None
        self._was_up = False

    # --- connecting --------------------------------------------------------------------
    def transport(self):
        with self._lock:
            if self._transport is not None and self._transport.is_active():
                return self._transport
            self._drop()
            attempts = RECONNECT_ATTEMPTS if self._was_up else 1
            attempt = 1
            while True:
                try:
                    self._transport = self._open()
                    self._was_up = True
                    return self._transport
                except _Unreachable as why:
                    if attempt == attempts:
                        again = f" (connection lost; {attempts} attempts to reconnect failed)" if self._was_up else ""
                        raise GregorError(f"{self.label}: {why}{again}") from None
                time.sleep(RECONNECT_PAUSE_S * attempt)
                attempt += 1

    def _open(self):
        import paramiko

        host = self.host
        try:
            sock = socket.create_connection((host.host, host.port), timeout=CONNECT_TIMEOUT_S)
        except ConnectionRefusedError:
            raise _Unreachable(
                f"connection refused on port {host.port}; is sshd running and listening there?"
            ) from None
        except socket.gaierror as error:
            raise GregorError(f"{self.label}: cannot resolve host name {host.host!r} ({error.strerror})") from None
        except (socket.timeout, TimeoutError):
            raise _Unreachable(f"no answer on port {host.port} within {CONNECT_TIMEOUT_S} s; is the host up?") from None
        except OSError as error:
            raise _Unreachable(f"unreachable: {error.strerror or error}") from None
        # Commands are small request/answer exchanges: without this, Nagle's
        # algorithm and delayed ACKs add ~40 ms to every one.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = paramiko.Transport(sock)
        try:
            expected = self._expected_keys()
            if expected:
                transport.get_security_options().key_types = _prefer(transport, expected)
            try:
                transport.start_client(timeout=CONNECT_TIMEOUT_S)
            except (paramiko.SSHException, EOFError, OSError) as error:
                raise _Unreachable(f"no SSH server answered on port {host.port} ({_text(error)})") from None
            self._check_host_key(transport.get_remote_server_key(), expected)
            self._authenticate(transport)
            transport.set_keepalive(KEEPALIVE_S)
            return transport
        except BaseException:
            transport.close()
            raise

    def _expected_keys(self) -> dict:
        """key type -> key this host must present ({} = nothing known)."""
        import paramiko

        if self.trust.insecure:
            return {}
        if self.host.host_key:
            kind, _, data = self.host.host_key.partition(" ")
            try:
                return {kind: paramiko.PKey.from_type_string(kind, base64.b64decode(data))}
            except Exception:  # noqa: BLE001 - a damaged key file of the Vagrant lab
                raise GregorError(
                    f"{self.label}: the Vagrant lab's host key file for {self.host.machine} is "
                    "damaged; run vagrant destroy -f and vagrant up again"
                ) from None
        known = paramiko.HostKeys()
        for path in (self.trust.known_hosts, "/etc/ssh/ssh_known_hosts"):
            if os.path.isfile(path):
                try:
                    known.load(path)
                except (OSError, paramiko.SSHException) as error:
                    raise GregorError(f"{self.label}: cannot read {path}: {_text(error)}") from None
        found = known.lookup(known_hosts_name(self.host))
        return dict(found) if found else {}

    def _check_host_key(self, key, expected: dict) -> None:
        if self.trust.insecure:
            return
        offered = f"{key.get_name()} {fingerprint(key)}"
        where = f"the Vagrant lab's key for {self.host.machine}" if self.host.host_key else self.trust.known_hosts
        if not expected:
            raise GregorError(
                f"{self.label}: unknown host key ({offered}); if that is the host's key, add it to "
                f"{self.trust.known_hosts} (ssh-keyscan -p {self.host.port} {self.host.host} >> "
                f"{self.trust.known_hosts}, after checking the fingerprint on the host) or pass --insecure-host-keys"
            )
        if expected.get(key.get_name()) == key:
            return
        if self.host.host_key:
            how = "if the machine was rebuilt outside Vagrant, run vagrant destroy -f and vagrant up again"
        else:
            how = (
                f"if the host was reinstalled, accept its new key: ssh-keygen -f {self.trust.known_hosts} "
                f"-R '{known_hosts_name(self.host)}', then add the new one after checking its fingerprint "
                f"(ssh-keyscan -p {self.host.port} {self.host.host} >> {self.trust.known_hosts}); "
                "or pass --insecure-host-keys"
            )
        old = ", ".join(f"{kind} {fingerprint(k)}" for kind, k in expected.items())
        raise GregorError(f"{self.label}: the host key has CHANGED: it offers {offered}, {where} has {old}; {how}")

    def _authenticate(self, transport) -> None:
        import paramiko

        user, keys = self.host.user, _load_keys(self.host.key_file, self.label)
        refused = None
        for path, key in keys:
            try:
                transport.auth_publickey(user, key)
                return
            except paramiko.BadAuthenticationType as error:
                raise GregorError(
                    f"{self.label}: the host accepts no public key for {user} (only "
                    f"{', '.join(error.allowed_types) or 'nothing'}); Gregor logs in with a key"
                ) from None
            except paramiko.AuthenticationException:
                refused = path
            except (paramiko.SSHException, EOFError, OSError) as error:
                raise _Unreachable(f"connection lost while logging in ({_text(error)})") from None
        raise GregorError(
            f"{self.label}: the host refused the key {refused} for user {user}; give the right "
            f"--ssh-key, or add its public key to {user}'s ~/.ssh/authorized_keys there"
        )

    def _drop(self) -> None:
        for thing in (self._sftp, self._transport):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001 - already broken
                    pass
        self._sftp = None
        self._transport = None

    def close(self) -> None:
        with self._lock:
            self._drop()
            self._was_up = False

    # --- commands ----------------------------------------------------------------------
    def run(
        self, command: str, stdin: bytes | None = None, timeout: float = 30, retry: bool = True
    ) -> tuple[int, bytes, bytes]:
        """Runs a shell command line there: (exit status, stdout, stderr).

        A lost connection is opened again and the command run again when
        `retry` (every command Gregor runs this way is idempotent); a command
        that must not run twice (a spawn) raises GregorError instead."""
        import paramiko

        for _attempt in range(1, RECONNECT_ATTEMPTS + 1):
            transport = self.transport()
            try:
                channel = transport.open_session(timeout=CONNECT_TIMEOUT_S)
            except (paramiko.SSHException, EOFError, OSError):
                self._lost(transport)
                continue
            try:
                return _run_on(channel, command, stdin, timeout, self.label)
            except LostConnection:
                self._lost(transport)
                if not retry:
                    raise GregorError(
                        f"{self.label}: the SSH connection was lost while running "
                        f"{command[:80]}; it may or may not have run"
                    ) from None
            finally:
                channel.close()
        raise GregorError(f"{self.label}: the SSH connection keeps failing ({RECONNECT_ATTEMPTS} attempts)")

    def _lost(self, transport) -> None:
        with self._lock:
            if self._transport is transport:
                self._drop()

    # --- files -------------------------------------------------------------------------
    def sftp(self):
        import paramiko

        with self._lock:
            transport = self.transport()
            if self._sftp is None or self._sftp.get_channel().get_transport() is not transport:
                try:
                    self._sftp = paramiko.SFTPClient.from_transport(transport)
                except (paramiko.SSHException, EOFError, OSError) as error:
                    raise GregorError(
                        f"{self.label}: the host offers no SFTP ({_text(error)}); "
                        "enable the sftp subsystem in its sshd_config"
                    ) from None
            return self._sftp

    def with_sftp(self, action):
        """Runs action(sftp), once more on a fresh connection if the
        connection was lost meanwhile (every transfer we make can be redone)."""
        import paramiko

        attempt = 1
        while True:
            sftp = self.sftp()
            transport = sftp.get_channel().get_transport()
            try:
                return action(sftp)
            except (EOFError, OSError, paramiko.SSHException) as error:
                if transport.is_active() or attempt == 2:  # a file's own error, or lost twice
                    raise GregorError(f"{self.label}: file transfer failed: {_text(error)}") from None
                self._lost(transport)
            attempt += 1


class _Unreachable(Exception):
    """A connection attempt that may succeed later (refused, timed out, lost)."""


def _run_on(channel, command: str, stdin: bytes | None, timeout: float, label: str):
    """Sends one command on an open channel and reads both streams to the end."""
    deadline = time.monotonic() + timeout + 10  # the remote `timeout` fires first
    try:
        channel.exec_command(command)
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
    except (EOFError, OSError) as error:
        raise LostConnection(str(error)) from None
    except Exception as error:  # noqa: BLE001 - paramiko's SSHException on a dead transport
        raise LostConnection(str(error)) from None
    out, err = [], []
    fd = channel.fileno()
    while True:
        while channel.recv_ready():
            out.append(channel.recv(65536))
        while channel.recv_stderr_ready():
            err.append(channel.recv_stderr(65536))
        if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        transport = channel.get_transport()
        if channel.closed or transport is None or not transport.is_active():
            if channel.exit_status_ready():
                continue
            raise LostConnection("channel closed without an exit status")
        left = deadline - time.monotonic()
        if left <= 0:
            raise GregorError(f"{label}: {command[:80]} did not finish within {timeout:g} s")
        select.select([fd], [], [], min(left, 1.0))
    status = channel.recv_exit_status()
    transport = channel.get_transport()
    if status == -1 and (transport is None or not transport.is_active()):
        raise LostConnection("the connection closed before the command's exit status came")
    return status, b"".join(out), b"".join(err)


def _load_keys(path: str | None, label: str) -> list[tuple[str, object]]:
    """The key file named, or else ssh's default key files; never a passphrase prompt."""
    import paramiko

    candidates = [path] if path else [os.path.expanduser(f"~/.ssh/{name}") for name in DEFAULT_KEYS]
    keys = []
    for candidate in candidates:
        if not os.path.isfile(candidate):
            if path:
                raise GregorError(f"--ssh-key {candidate}: no such file")
            continue
        try:
            keys.append((candidate, paramiko.PKey.from_path(candidate)))
        except paramiko.PasswordRequiredException:
            raise GregorError(
                f"--ssh-key {candidate}: the key is protected by a passphrase; give an "
                "unencrypted key made for the lab (ssh-keygen -t ed25519 -N '')"
            ) from None
        except (paramiko.SSHException, ValueError, OSError, UnicodeDecodeError):
            if path:
                raise GregorError(
                    f"--ssh-key {candidate}: not a private key Gregor can read (give an "
                    "OpenSSH or PEM private key file, e.g. one made by ssh-keygen)"
                ) from None
    if not keys:
        raise GregorError(f"{label}: no SSH key to log in with; give --ssh-key FILE")
    return keys


def _prefer(transport, expected: dict) -> tuple[str, ...]:
    """Host key types in negotiation order: those we know for this host first,
    so a host with several keys shows the one we can check."""
    ours = transport.get_security_options().key_types
    known = [kind for kind in ours if kind in expected]
    # rsa keys are announced as ssh-rsa in known_hosts but negotiated as rsa-sha2-*
    if "ssh-rsa" in expected:
        known = [k for k in ours if k.startswith("rsa-sha2") or k == "ssh-rsa"] + known
    return tuple(dict.fromkeys(known + [k for k in ours if k not in known]))


def _text(error: BaseException) -> str:
    return (str(error) or type(error).__name__).splitlines()[0][:200]
