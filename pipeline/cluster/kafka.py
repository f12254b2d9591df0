"""Apache Kafka on this machine: the broker's jars from Maven Central, one KRaft node.

`KafkaBroker` has the shape of the embedded Tansu broker (pipeline.cluster.broker):
a context manager with `.url`, started and stopped by its own PID, logging to a file.
It runs one process in KRaft combined mode (`process.roles=broker,controller`) on two
free ports of 127.0.0.1, with its data in a temporary directory removed at stop.

The jars come from the project's pom (deploy/kafka/pom.xml, which pins the version):
Maven copies them once into ~/.cache/canonflow/kafka-<version>/ ($XDG_CACHE_HOME is
honoured), and every broker after that starts from the copy with
`java -cp '<cache>/*' kafka.Kafka server.properties`. The storage is formatted first
with kafka.tools.StorageTool from the same jars (`kafka-storage format`).

The broker keeps Kafka's defaults (max.message.bytes included), except what a single
node needs: replication factor 1 and min ISR 1 for its internal topics, and no
initial rebalance delay, so that a new consumer group joins at once.

With `scram_users`, its one client listener takes SASL_PLAINTEXT logins with
SCRAM-SHA-512 only. The users' credentials go into the cluster's metadata when the
storage is formatted (`kafka-storage format --add-scram`), so they exist before the
first client connects; the broker's own connections log in as a user `broker` with a
password made for this start.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import fcntl
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from pipeline.cluster.broker import (
    BrokerError,
    BrokerProcess,
    die_with_parent,
    free_port,
    port_in_use,
    wait_for_port,
)

#: The project's pom: it names the Kafka release and the jars that run it.
POM = Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "pom.xml"
#: The JVM's largest heap. Measured: a broker under the test suite stays well inside
#: it, and the process's resident size is about 0.4 GiB (docs/operating/broker.md).
DEFAULT_HEAP = "256m"
#: The broker's settings besides its ports and data directory: Kafka's defaults, except
#: what one node needs.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}
#: The SASL mechanism of a broker with `scram_users`: the one deploy/ names for Kafka
#: with SCRAM (Strimzi's `scram-sha-512` users).
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: The broker's log: Kafka's own layout, its INFO lines (start, stop, topic changes,
#: refused requests) in one file; the request log stays off unless asked for.
_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.request.name = kafka.request.logger
logger.request.level = {request_level}
logger.request.additivity = true
"""


def kafka_version(pom: Path = POM) -> str:
    """The Kafka release the pom pins (its `kafka.version` property).
    Raises BrokerError when the pom has none."""
    try:
        m = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    except OSError as e:
        raise BrokerError(f"cannot read {pom}: {e.strerror}") from None
    if m is None:
        raise BrokerError(f"{pom} names no <kafka.version>")
    return m.group(1)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "canonflow"


def java_binary() -> str:
    """The `java` to run the broker with: $JAVA_HOME's, else the one on PATH.
    Raises BrokerError when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerError("Apache Kafka needs Java 17 or newer: no `java` on PATH "
                          "(install a JDK, or set JAVA_HOME)")
    return found


def kafka_jars(pom: Path = POM) -> Path:
    """The directory holding the jars of the pom's Kafka release, copied there by Maven
    the first time (one process at a time, under a lock; the others wait and reuse it).
    Raises BrokerError when Maven is missing or fails (its last lines in the message)."""
    version = kafka_version(pom)
    root = cache_root()
    jars = root / f"kafka-{version}"
    done = jars / ".complete"
    if done.exists():
        return jars
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f".kafka-{version}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if done.exists():  # another process copied them while we waited
            return jars
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(f"Apache Kafka {version}'s jars are not in {jars}, and there is "
                              "no `mvn` on PATH to fetch them (install Maven 3.8+)")
        staging = Path(tempfile.mkdtemp(prefix=f".kafka-{version}-", dir=root))
        try:
            run = subprocess.run(
                [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                 f"-DoutputDirectory={staging}"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
            if run.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
                tail = " ".join((run.stdout + run.stderr).split())[-400:]
                raise BrokerError(f"Maven could not fetch Apache Kafka {version} "
                                  f"(status {run.returncode}): {tail}")
            (staging / ".complete").write_text(version + "\n")
            shutil.rmtree(jars, ignore_errors=True)
            staging.rename(jars)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return jars
    finally:
        os.close(fd)


def cluster_id() -> str:
    """A new Kafka cluster id: a UUID in URL-safe base64, as `kafka-storage random-uuid`.
    One in 32 starts with "-": it is passed as `--cluster-id=<id>`, never as a separate
    argument an option parser would take for an option."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker(BrokerProcess):
    """An Apache Kafka process of our own. Use as a context manager or call start()/stop().

    `request_log` turns on Kafka's request logger (every request, with its API version,
    in the log): what to read when the broker refuses what a client sends. `config`
    adds or replaces broker settings (server.properties lines). `scram_users` (name to
    password) makes the client listener SASL_PLAINTEXT with SCRAM-SHA-512 logins only,
    for those users (and the broker's own)."""

    engine = "kafka"

    def __init__(self, port: int | None = None, host: str = "127.0.0.1",
                 log_path: str | None = None, heap: str = DEFAULT_HEAP,
                 request_log: bool = False, config: dict[str, str] | None = None,
                 scram_users: dict[str, str] | None = None):
        super().__init__(port, host, log_path)
        self.heap = heap
        self.request_log = request_log
        self.config = dict(config or {})
        self.scram_users = dict(scram_users or {})
        for name, password in self.scram_users.items():
            if not re.fullmatch(r"[A-Za-z0-9._-]+", name + password):
                raise BrokerError(f"SCRAM user {name!r}: use letters, digits, '.', '_' and "
                                  "'-' in names and passwords (they go inside a JAAS line)")
        if self.scram_users:  # the broker's own login: nobody else needs to know it
            self.scram_users.setdefault("broker", secrets.token_hex(16))
        self.version = kafka_version()
        self.workdir: Path | None = None

    @property
    def security_protocol(self) -> str:
        return "SASL_PLAINTEXT" if self.scram_users else "PLAINTEXT"

    def _properties(self, controller: int, data: Path) -> str:
        proto = self.security_protocol
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{controller}",
            "listeners": f"{proto}://{self.host}:{self.port},CONTROLLER://{self.host}:{controller}",
            "advertised.listeners": f"{proto}://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": proto,
            "listener.security.protocol.map": f"{proto}:{proto},CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            **SINGLE_NODE,
        }
        if self.scram_users:
            jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="broker" password="{self.scram_users["broker"]}";')
            lines |= {"sasl.enabled.mechanisms": SCRAM_MECHANISM,
                      "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                      f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
                          jaas}
        lines |= self.config
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def _scram_arguments(self) -> list[str]:
        """StorageTool's `--add-scram` for every user: their credentials are metadata
        records of the new cluster, there before the broker takes its first login."""
        return [arg for name, password in self.scram_users.items()
                for arg in ("--add-scram",
                            f"{SCRAM_MECHANISM}=[name={name},password={password}]")]

    def _java(self, jars: Path, *args: str) -> list[str]:
        return [java_binary(), f"-Xmx{self.heap}", "-Xms32m", "-XX:+UseSerialGC",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", f"{jars}/*", *args]

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        """Fetch the jars if need be, format the storage, start Kafka, and wait until it
        answers a metadata request.

        Raises BrokerError when the port is taken, when java or Maven is missing, or when
        Kafka does not start: with the last line of its log."""
        if port_in_use(self.host, self.port):
            raise BrokerError(f"cannot listen on {self.host}:{self.port}: the port is in use")
        jars = kafka_jars()
        controller = free_port(self.host)
        self.workdir = Path(tempfile.mkdtemp(prefix="canonflow-kafka-"))
        data = self.workdir / "data"
        (self.workdir / "server.properties").write_text(self._properties(controller, data))
        (self.workdir / "log4j2.properties").write_text(
            _LOG4J2.format(request_level="DEBUG" if self.request_log else "WARN"))
        if self.log_path is None:
            self.log_path = str(self.workdir / "kafka.log")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process
        fmt = subprocess.run(
            self._java(jars, "kafka.tools.StorageTool", "format", "--config",
                       str(self.workdir / "server.properties"), f"--cluster-id={cluster_id()}",
                       *self._scram_arguments()),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, timeout=120)
        if fmt.returncode != 0:
            self.stop()
            raise BrokerError(f"formatting Kafka's storage failed ({self.last_words()})")
        self.proc = subprocess.Popen(
            self._java(jars, "kafka.Kafka", str(self.workdir / "server.properties")),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            preexec_fn=die_with_parent(),  # and our death, even by SIGKILL, reaches it
        )
        atexit.register(self.stop)  # a test run that ends without the fixture's finally
        deadline = time.monotonic() + timeout
        try:
            wait_for_port(self.host, self.port, timeout)
            self._wait_for_metadata(deadline)
        except BrokerError as e:
            status = self.proc.poll() if self.proc else None
            self.stop()
            why = f"exited with status {status}" if status is not None else f"did not start ({e})"
            raise BrokerError(f"Apache Kafka {self.version} {why} ({self.last_words()})") from None
        return self

    def _wait_for_metadata(self, deadline: float) -> None:
        """Until the broker answers a metadata request with itself in it (the listener
        opens before the controller has elected itself and registered the broker)."""
        from aiokafka.admin import AIOKafkaAdminClient

        async def ask() -> bool:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap,
                                        request_timeout_ms=5000, **self.client_login())
            try:
                await admin.start()
                return bool((await admin.describe_cluster()).get("brokers"))
            finally:
                await admin.close()

        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise BrokerError("the process ended")
            with contextlib.suppress(Exception):  # not yet: aiokafka's errors, timeouts
                if asyncio.run(ask()):
                    return
            if time.monotonic() > deadline:
                raise BrokerError("no answer to a metadata request")
            time.sleep(0.2)

    def client_login(self, user: str = "broker") -> dict[str, str]:
        """aiokafka's keyword arguments for a login as `user` (none without SASL)."""
        if not self.scram_users:
            return {}
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": SCRAM_MECHANISM,
                "sasl_plain_username": user, "sasl_plain_password": self.scram_users[user]}

    def last_words(self) -> str:
        """The last error line of Kafka's log (else its last line), with where the log is."""
        lines = [x for x in self.log_lines(16384) if not x[0].isspace()]
        errors = [x for x in lines if " ERROR " in x or "Exception" in x]
        last = (errors or lines or ["its log is empty"])[-1]
        return f"{' '.join(last.split())[:300]}; log {self.log_path}"

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (Kafka's orderly shutdown), SIGKILL after `timeout` seconds; then the
        temporary directory goes, but for the log when it is there."""
        atexit.unregister(self.stop)
        self.stop_process(timeout)
        if self.workdir is not None:
            inside = Path(self.log_path or "").parent == self.workdir
            shutil.rmtree(self.workdir / "data" if inside else self.workdir, ignore_errors=True)


def describe() -> str:
    """One line naming the Kafka release, where its jars are and the Java that runs it,
    the jars fetched first if need be. Raises BrokerError (no java, no mvn, Maven failed)."""
    jars = kafka_jars()
    java = java_binary()
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    first = (out.stderr or out.stdout).strip().splitlines()
    return (f"Apache Kafka {kafka_version()} (jars {jars}; "
            f"java {java}: {first[0] if first else 'no version'})")


if __name__ == "__main__":  # `make test` says which broker its tests run on
    import sys

    try:
        print(f"canonflow: tests on {describe()}", flush=True)
    except BrokerError as e:
        sys.exit(f"canonflow: {e}")
