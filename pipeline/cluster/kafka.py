"""Apache Kafka on this machine: the broker's jars from Maven Central, one KRaft node
or a cluster of three.

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

`KafkaCluster` runs three such nodes as one cluster (a quorum of three controllers,
every topic on three replicas, two in sync for a write) for fault tests: a node can
be killed, stopped, continued or restarted on its ports and data directory.
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
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

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
#: A cluster node's largest heap. A node restarted on data it must recover ran out of
#: 256 MiB in the full test run: its log cleaner allocates its 128 MiB dedupe buffer at
#: start, after log recovery has filled much of the heap (OutOfMemoryError in
#: SkimpyOffsetMap, the node exits).
CLUSTER_HEAP = "512m"
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


def java_command(jars: Path, heap: str, workdir: Path, *args: str) -> list[str]:
    """`java` running a class of the Kafka jars with a small heap, its log4j2 settings
    from `workdir`."""
    return [java_binary(), f"-Xmx{heap}", "-Xms32m", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}",
            "-cp", f"{jars}/*", *args]


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
        assert self.workdir is not None
        return java_command(jars, self.heap, self.workdir, *args)

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


#: The settings of every node of a KafkaCluster besides its id, ports and data directory:
#: Kafka's defaults, except the internal topics (consumer offsets, transactions, share
#: groups) on all three nodes and written to two before a write is acknowledged, the
#: same for the topics created without settings of their own, and no initial rebalance
#: delay (as the single node).
CLUSTER = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
}


class KafkaNode(BrokerProcess):
    """One node of a KafkaCluster: broker and controller in one process. Its id, ports
    and data directory stay the same across restarts; only its process changes."""

    engine = "kafka"

    def __init__(self, node_id: int, host: str, workdir: Path, heap: str):
        super().__init__(None, host, str(workdir / "kafka.log"))
        self.node_id = node_id
        self.controller_port = free_port(host)
        self.workdir = workdir
        self.heap = heap
        self.paused = False

    def properties(self, voters: str, config: dict[str, str]) -> str:
        lines = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
                         f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            **CLUSTER,
            **config,
        }
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def launch(self, jars: Path) -> None:
        """Start its process on its ports and data directory (formatted before)."""
        if port_in_use(self.host, self.port) or port_in_use(self.host, self.controller_port):
            raise BrokerError(f"node {self.node_id}: port {self.port} or "
                              f"{self.controller_port} of {self.host} is in use")
        self._log = open(self.log_path or "", "ab")  # noqa: SIM115 - kept open for the process
        self.proc = subprocess.Popen(
            java_command(jars, self.heap, self.workdir, "kafka.Kafka",
                         str(self.workdir / "server.properties")),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=die_with_parent())
        self.paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise BrokerError(f"node {self.node_id} is not running")
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL (a crash): the process goes at once, its data directory stays."""
        if self.proc is not None and self.proc.poll() is None:
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.paused = False
        self.stop_process(0)

    def last_words(self) -> str:
        lines = [x for x in self.log_lines(16384) if not x[0].isspace()]
        errors = [x for x in lines if " ERROR " in x or "Exception" in x]
        last = (errors or lines or ["its log is empty"])[-1]
        return f"node {self.node_id}: {' '.join(last.split())[:300]}; log {self.log_path}"


class KafkaCluster:
    """Three Apache Kafka nodes of one cluster on 127.0.0.1, each a broker and a
    controller (KRaft combined mode: a quorum of three voters, `controller.quorum.voters`),
    formatted with one cluster id. Every topic's replicas default to three, two of them
    in sync for a write to be acknowledged (CLUSTER). Use as a context manager or call
    start()/stop().

    For fault tests: `kill` (SIGKILL), `pause`/`resume` (SIGSTOP/SIGCONT), `restart`
    (one node, on its ports and data directory) and `restart_all`; `leader` says which
    node leads a topic partition, `controller` which leads the quorum. Each node logs
    to its own file in the cluster's temporary directory; at stop the data goes and the
    logs stay (under `log_dir`, when given, else in the temporary directory)."""

    engine = "kafka"

    def __init__(self, size: int = 3, host: str = "127.0.0.1", heap: str = CLUSTER_HEAP,
                 config: dict[str, str] | None = None, log_dir: str | None = None):
        self.host, self.heap, self.config = host, heap, dict(config or {})
        self.version = kafka_version()
        self.workdir = Path(tempfile.mkdtemp(prefix="canonflow-kafka-cluster-"))
        logs = Path(log_dir) if log_dir else self.workdir
        self.nodes: dict[int, KafkaNode] = {}
        for n in range(1, size + 1):
            node = KafkaNode(n, host, self.workdir / f"node-{n}", heap)
            node.log_path = str(logs / f"kafka-{n}.log")
            self.nodes[n] = node
        self._jars: Path | None = None

    @property
    def url(self) -> str:
        """Faust-style broker URL naming every node: kafka://h:p1;kafka://h:p2;..."""
        return ";".join(n.url for n in self.nodes.values())

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def _answering(self) -> str:
        """host:port of the nodes that run and are not paused (an admin client sent to a
        paused node waits for its request timeout)."""
        return ",".join(n.bootstrap for n in self.nodes.values() if n.alive() and not n.paused)

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Format every node's storage with one cluster id, start the three, and wait
        until the cluster's metadata lists all of them.

        Raises BrokerError when a port is taken, when java or Maven is missing, or when
        a node does not start: with the last error line of its log."""
        self._jars = kafka_jars()
        voters = ",".join(f"{n.node_id}@{self.host}:{n.controller_port}"
                          for n in self.nodes.values())
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(request_level="WARN"))
        ident = cluster_id()
        formats = []
        for node in self.nodes.values():
            node.workdir.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.workdir / "log4j2.properties", node.workdir / "log4j2.properties")
            (node.workdir / "server.properties").write_text(node.properties(voters, self.config))
            formats.append(subprocess.Popen(
                java_command(self._jars, "128m", node.workdir, "kafka.tools.StorageTool",
                             "format", "--config", str(node.workdir / "server.properties"),
                             f"--cluster-id={ident}"),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        for node, fmt in zip(self.nodes.values(), formats, strict=True):
            out, _ = fmt.communicate(timeout=120)
            if fmt.returncode != 0:
                self.stop()
                tail = " ".join(out.decode("utf-8", "replace").split())[-300:]
                raise BrokerError(f"formatting node {node.node_id}'s storage failed: {tail}")
        atexit.register(self.stop)
        for node in self.nodes.values():
            node.launch(self._jars)
        self.wait_for(set(self.nodes), timeout)
        return self

    def wait_for(self, ids: set[int], timeout: float = 120.0) -> None:
        """Until the cluster's metadata, asked of each node in `ids`, lists every node
        of `ids` (a broker is listed once the controller has unfenced it).
        Raises BrokerError on timeout or when a node's process ends."""
        deadline = time.monotonic() + timeout
        for n in sorted(ids):
            node = self.nodes[n]
            while True:
                if not node.alive():
                    raise BrokerError(f"Apache Kafka {self.version} node {n} exited "
                                      f"({node.last_words()})")
                with contextlib.suppress(Exception):  # not yet: aiokafka's errors, timeouts
                    if ids <= asyncio.run(_brokers(node.bootstrap)):
                        break
                if time.monotonic() > deadline:
                    raise BrokerError(f"Apache Kafka {self.version} node {n} does not list "
                                      f"nodes {sorted(ids)} ({node.last_words()})")
                time.sleep(0.2)

    def kill(self, node_id: int) -> None:
        """kill -9 one node: its process dies at once, its data stays for `restart`."""
        self.nodes[node_id].kill()

    def pause(self, node_id: int) -> None:
        """SIGSTOP one node: its process stays, its sockets open, and answers nothing."""
        self.nodes[node_id].signal(signal.SIGSTOP)
        self.nodes[node_id].paused = True

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        self.nodes[node_id].signal(signal.SIGCONT)
        self.nodes[node_id].paused = False

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Start one node again on its ports and data directory (killed first if it
        runs), and wait until it is back in the cluster's metadata."""
        node = self.nodes[node_id]
        node.kill()
        assert self._jars is not None, "start the cluster first"
        node.launch(self._jars)
        self.wait_for({n for n, x in self.nodes.items() if x.alive()}, timeout)

    def restart_all(self, timeout: float = 120.0, stop_timeout: float = 30.0) -> None:
        """Stop every node (stop_all) and start the three again on their ports and data
        directories (start_all)."""
        self.stop_all(stop_timeout)
        self.start_all(timeout)

    def stop_all(self, timeout: float = 30.0) -> None:
        """SIGTERM to every node at once (Kafka's orderly shutdown), SIGKILL to those
        still running after `timeout` seconds; their data stays for start_all."""
        for node in self.nodes.values():
            if node.paused:
                self.resume(node.node_id)
            if node.alive():
                node.signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.stop_process(timeout)

    def start_all(self, timeout: float = 120.0) -> None:
        """Start every stopped node again and wait until the metadata lists all three."""
        assert self._jars is not None, "start the cluster first"
        for node in self.nodes.values():
            if not node.alive():
                node.launch(self._jars)
        self.wait_for(set(self.nodes), timeout)

    def leader(self, topic: str, partition: int) -> int:
        """The node that leads `topic`'s `partition`, from the cluster's metadata (-1: none).
        Raises BrokerError when the cluster does not know the topic partition."""
        return asyncio.run(_leader(self._answering(), topic, partition))

    def under_replicated(self) -> int:
        """How many partitions of the cluster have a replica out of sync."""
        return asyncio.run(_under_replicated(self._answering()))

    def controller(self) -> int:
        """The node that leads the KRaft quorum (the active controller), from Kafka's
        DescribeQuorum answer. Raises BrokerError when no node answers it."""
        return asyncio.run(_quorum_leader(self._answering()))

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every node (SIGTERM at once, SIGKILL after `timeout` seconds); then the
        temporary directory goes, but for the logs when they are in it."""
        atexit.unregister(self.stop)
        for node in self.nodes.values():
            if node.paused and node.alive():
                node.signal(signal.SIGCONT)
            if node.alive():
                node.signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.stop_process(timeout)
        if all(Path(n.log_path or "").parent != self.workdir for n in self.nodes.values()):
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            for node in self.nodes.values():
                shutil.rmtree(node.workdir / "data", ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _brokers(bootstrap: str) -> set[int]:
    """The node ids in the metadata answer of the node(s) at `bootstrap`."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        return {b["node_id"] for b in (await admin.describe_cluster())["brokers"]}
    finally:
        await admin.close()


async def _leader(bootstrap: str, topic: str, partition: int) -> int:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        for t in await admin.describe_topics([topic]):
            for p in t["partitions"] if t["error_code"] == 0 else ():
                if p["partition"] == partition:
                    return int(p["leader"])
    finally:
        await admin.close()
    raise BrokerError(f"the cluster has no partition {partition} of {topic}")


async def _under_replicated(bootstrap: str) -> int:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        topics = await admin.describe_topics(await admin.list_topics())
    finally:
        await admin.close()
    return sum(1 for t in topics for p in t["partitions"] if len(p["isr"]) < len(p["replicas"]))


async def _quorum_leader(bootstrap: str) -> int:
    """DescribeQuorum (KIP-595), which aiokafka's admin client lacks: a broker forwards it
    to the active controller, whose answer names the leader of __cluster_metadata."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        node = admin._client.get_random_node()  # noqa: SLF001 - aiokafka's own way to pick one
        answer = await admin._client.send(node, _describe_quorum())  # noqa: SLF001
    finally:
        await admin.close()
    if answer.error_code:
        raise BrokerError(f"DescribeQuorum: error {answer.error_code}")
    for _topic, partitions, _tags in answer.topics:
        for _index, error, leader, *_ in partitions:
            if error == 0 and leader >= 0:
                return int(leader)
    raise BrokerError("DescribeQuorum: the quorum has no leader")


def _describe_quorum() -> Any:
    """A DescribeQuorum request for __cluster_metadata's one partition, versions 0 and 1
    (aiokafka's protocol classes, built here so that importing this module does not
    import aiokafka)."""
    from aiokafka.protocol.api import Request, RequestStruct, Response
    from aiokafka.protocol.types import (
        CompactArray,
        CompactString,
        Int16,
        Int32,
        Int64,
        Schema,
        TaggedFields,
    )

    def answer(replica: tuple[tuple[str, Any], ...]) -> Schema:
        return Schema(
            ("error_code", Int16),
            ("topics", CompactArray(
                ("topic_name", CompactString("utf-8")),
                ("partitions", CompactArray(
                    ("partition_index", Int32), ("error_code", Int16), ("leader_id", Int32),
                    ("leader_epoch", Int32), ("high_watermark", Int64),
                    ("current_voters", CompactArray(*replica, ("tags", TaggedFields))),
                    ("observers", CompactArray(*replica, ("tags", TaggedFields))),
                    ("tags", TaggedFields))),
                ("tags", TaggedFields))),
            ("tags", TaggedFields))

    asked = Schema(
        ("topics", CompactArray(
            ("topic_name", CompactString("utf-8")),
            ("partitions", CompactArray(("partition_index", Int32), ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("tags", TaggedFields))
    v0 = (("replica_id", Int32), ("log_end_offset", Int64))
    v1 = (*v0, ("last_fetch_timestamp", Int64), ("last_caught_up_timestamp", Int64))

    class Answer0(Response):
        API_KEY, API_VERSION, SCHEMA = 55, 0, answer(v0)

    class Answer1(Response):
        API_KEY, API_VERSION, SCHEMA = 55, 1, answer(v1)

    class Ask0(RequestStruct):
        FLEXIBLE_VERSION = True
        API_KEY, API_VERSION, RESPONSE_TYPE, SCHEMA = 55, 0, Answer0, asked

    class Ask1(RequestStruct):
        FLEXIBLE_VERSION = True
        API_KEY, API_VERSION, RESPONSE_TYPE, SCHEMA = 55, 1, Answer1, asked

    class DescribeQuorum(Request[Ask0 | Ask1]):  # type: ignore[valid-type]
        API_KEY = 55

        def build(self, request_struct_class: Any) -> Any:
            return request_struct_class([("__cluster_metadata", [(0, {})], {})], {})

    return DescribeQuorum()


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
