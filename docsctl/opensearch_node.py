"""The local OpenSearch node behind `docsctl opensearch up|down|status|logs`: no Docker needed.

Where things live (one node per HTTP port, so nodes on different ports never collide):

    <cache_dir>/downloads/opensearch-<v>.zip, opensearch-knn-<v>.0.zip    Maven artifacts, fetched once
    <cache_dir>/opensearch-<v>/                     unpacked, k-NN installed; not written to afterwards
    <data_dir>/opensearch/<port>/                   config/ data/ logs/ tmp/ node.log opensearch.pid

Decisions:
- The distribution is Maven's integ-test-zip: the minimal OpenSearch, without the security plugin (so
  plain HTTP on 127.0.0.1) and without a bundled JDK. The k-NN plugin comes from its own Maven zip; it
  holds no faiss/nmslib native libraries, which is fine because docsctl uses only the Lucene engine.
- Java: since nothing is bundled, the JDK is, in order: `java_home` from the settings (must be 21+);
  $OPENSEARCH_JAVA_HOME or $JAVA_HOME when 21+; a `jdk/` inside the install, should a future zip ship
  one (it is what upstream tests with); else the newest 21+ JDK under the usual system folders.
- OpenSearch refuses to run as root. As root, the node runs in a user namespace (`unshare --user`):
  inside it is an ordinary uid, outside its files stay root's, so nothing needs chown and a root-only
  ~/.cache stays readable.
- Each node gets its own copy of config/ (its keystore, jvm.options with absolute gc-log and heap-dump
  paths), because bin/opensearch-env `cd`s into the install and the stock paths are relative to it.
- The node runs detached, in its own session, and outlives the command that started it. Its PID goes
  to a file; `down` signals that PID only, after checking it is still this node's process.
- A node runs alone (`discovery.type=single-node`) unless `up` is given a `Cluster`: then it forms or
  joins a cluster of several local nodes, each on its own port (tests of replicas and failover).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from docsctl.config import Settings
from docsctl.errors import NodeError
from docsctl.process import pid_alive

Progress = Callable[[str], None]

MIN_JAVA = 21
HOST = "127.0.0.1"
PID_FILE = "opensearch.pid"
LOG_FILE = "node.log"
_MARKER = ".docsctl-installed"
_DEFAULT_REPOSITORY = Settings.maven_repository
_JVM_DIRS = ("/usr/lib/jvm", "/usr/local/lib/jvm", "/opt/java", "/Library/Java/JavaVirtualMachines")
_NAMESPACE_UID = 1000  # who the node is inside its user namespace when docsctl runs as root
_LOG_TAIL = 25  # log lines quoted in an error
# Left out of the log lines quoted in errors: Java stack frames and the JVM's start-up warnings.
_NOISE = re.compile(r"\s+(at |\.\.\. \d+ more)|WARNING: |warning: no-jdk")


def _quiet(message: str) -> None:
    pass


@dataclass(frozen=True)
class Cluster:
    """How a node takes part in a cluster of several nodes instead of running alone.

    Every node of the cluster gets the same `name`. `transport_port` fixes this node's node-to-node
    port so that the others can list it in their `seed_hosts` ("127.0.0.1:<port>"). The first start of
    a new cluster needs `initial_cluster_manager_nodes`: the node names (see `node_name`) that elect
    its first cluster manager; a node that joins a running cluster needs only `seed_hosts`.
    """

    name: str
    transport_port: int | None = None
    seed_hosts: tuple[str, ...] = ()
    initial_cluster_manager_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeStatus:
    """What is known about the node on one port. `running` means OpenSearch answers HTTP there."""

    running: bool
    pid: int | None  # the live process docsctl started on this port; None for a node started elsewhere
    url: str
    version: str | None
    health: str | None  # green | yellow | red; None when nothing answers
    data_dir: Path  # this node's folder: config/, data/, logs/, its PID file and node.log
    log_file: Path
    install_dir: Path

    @property
    def state(self) -> str:
        """running, starting (our process is alive but does not answer yet) or stopped."""
        if self.running:
            return "running"
        return "starting" if self.pid is not None else "stopped"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "running": self.running,
            "pid": self.pid,
            "url": self.url,
            "version": self.version,
            "health": self.health,
            "data_dir": str(self.data_dir),
            "log_file": str(self.log_file),
            "install_dir": str(self.install_dir),
        }


# -- paths ------------------------------------------------------------------------------------------


def install_dir(settings: Settings) -> Path:
    return settings.cache_dir / f"opensearch-{settings.opensearch_version}"


def node_dir(settings: Settings) -> Path:
    return settings.data_dir / "opensearch" / str(settings.opensearch_port)


def node_url(settings: Settings) -> str:
    return f"http://{HOST}:{settings.opensearch_port}"


def node_name(settings: Settings) -> str:
    """The node.name of the node on settings.opensearch_port."""
    return f"docsctl-{settings.opensearch_port}"


# -- install ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Artifact:
    group: str
    name: str
    version: str
    kind: str = "zip"

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.name}:{self.version}:{self.kind}"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.{self.kind}"

    def url(self, repository: str) -> str:
        group = self.group.replace(".", "/")
        return f"{repository.rstrip('/')}/{group}/{self.name}/{self.version}/{self.file_name}"


def _artifacts(version: str) -> tuple[_Artifact, _Artifact]:
    """The distribution and the k-NN plugin built for it (plugins add a fourth version digit)."""
    return (
        _Artifact("org.opensearch.distribution.integ-test-zip", "opensearch", version),
        _Artifact("org.opensearch.plugin", "opensearch-knn", f"{version}.0"),
    )


def ensure_installed(settings: Settings, progress: Progress | None = None) -> Path:
    """Download (once), unpack and add the k-NN plugin; return the install folder. Idempotent."""
    say = progress or _quiet
    version = settings.opensearch_version
    home = install_dir(settings)
    if (home / _MARKER).is_file():
        return home
    settings.cache_dir.mkdir(parents=True, exist_ok=True)
    with _locked(settings.cache_dir / f".opensearch-{version}.lock"):
        if (home / _MARKER).is_file():  # another process finished while we waited
            return home
        distribution, knn = _artifacts(version)
        distribution_zip = _download(distribution, settings, say)
        knn_zip = _download(knn, settings, say)
        staging = Path(tempfile.mkdtemp(prefix=f".opensearch-{version}-", dir=settings.cache_dir))
        try:
            say(f"unpacking OpenSearch {version}")
            _unzip(distribution_zip, staging)
            tree = staging / f"opensearch-{version}"
            if not (tree / "bin" / "opensearch").is_file():
                raise NodeError(f"{distribution_zip} does not hold opensearch-{version}/bin/opensearch")
            say("installing the k-NN plugin")
            _verify_zip(knn_zip)
            _install_plugin(tree, knn_zip, find_java(settings, tree))
            (tree / _MARKER).write_text(json.dumps({"opensearch": version, "knn": knn.version}) + "\n")
            if home.exists():  # an unfinished install left by an older docsctl: no marker
                shutil.rmtree(home)
            os.replace(tree, home)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return home


def _download(artifact: _Artifact, settings: Settings, say: Progress) -> Path:
    """The artifact in <cache_dir>/downloads, fetched if absent: with mvn (it knows the user's mirrors
    and proxies) unless a non-default maven_repository is set, else over HTTPS from that repository."""
    downloads = settings.cache_dir / "downloads"
    target = downloads / artifact.file_name
    if target.is_file():
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    problems = []
    if shutil.which("mvn") and settings.maven_repository.rstrip("/") == _DEFAULT_REPOSITORY:
        say(f"downloading {artifact.coordinates} with mvn")
        try:
            _download_with_mvn(artifact, target)
            return target
        except NodeError as exc:
            problems.append(str(exc))
    url = artifact.url(settings.maven_repository)
    say(f"downloading {url}")
    try:
        _download_https(url, target, say)
        return target
    except NodeError as exc:
        problems.append(str(exc))
    raise NodeError(f"cannot download {artifact.coordinates}: {'; '.join(problems)}")


def _download_with_mvn(artifact: _Artifact, target: Path) -> None:
    # An empty working folder, so that no pom.xml around turns this into a project build.
    work = Path(tempfile.mkdtemp(prefix=".mvn-", dir=target.parent))
    try:
        command = [
            "mvn",
            "-q",
            "-B",
            "dependency:copy",
            f"-Dartifact={artifact.coordinates}",
            f"-DoutputDirectory={work / 'out'}",
        ]
        try:
            done = subprocess.run(
                command, cwd=work, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NodeError(f"mvn failed: {exc}") from None
        fetched = work / "out" / artifact.file_name
        if done.returncode != 0 or not fetched.is_file():
            lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            raise NodeError(f"mvn failed: {_strip_ansi(lines[-1]) if lines else f'exit {done.returncode}'}")
        os.replace(fetched, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _download_https(url: str, target: Path, say: Progress) -> None:
    partial = target.with_name(f".{target.name}.part")
    digest = hashlib.sha1()
    try:
        with _open_url(url, timeout=60) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done, shown = 0, 0.0
            while block := response.read(1 << 20):
                out.write(block)
                digest.update(block)
                done += len(block)
                if total and time.monotonic() - shown > 1:
                    shown = time.monotonic()
                    say(f"downloading {target.name}: {done >> 20} of {total >> 20} MB")
        expected = _expected_sha1(url)
        if expected and expected != digest.hexdigest():
            raise NodeError(f"{url} does not match its .sha1 checksum")
        os.replace(partial, target)
    except (OSError, urllib.error.URLError, http.client.HTTPException) as exc:
        raise NodeError(f"{url}: {exc}") from None
    finally:
        partial.unlink(missing_ok=True)


def _expected_sha1(url: str) -> str | None:
    try:
        with _open_url(url + ".sha1", timeout=30) as response:
            words = response.read(200).decode("ascii", "replace").split()
    except (OSError, urllib.error.URLError, http.client.HTTPException):
        return None
    return words[0].lower() if words else None


def _unzip(archive: Path, destination: Path) -> None:
    """Extract, keeping the Unix modes (zipfile drops them, and bin/ must stay executable)."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            for info in bundle.infolist():
                path = Path(bundle.extract(info, destination))
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    path.chmod(mode)
    except zipfile.BadZipFile as exc:
        archive.unlink(missing_ok=True)
        raise NodeError(f"{archive} was damaged ({exc}) and has been removed: run the command again") from None


def _verify_zip(archive: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as bundle:
            damaged = bundle.testzip()
    except zipfile.BadZipFile as exc:
        damaged = str(exc)
    if damaged:
        archive.unlink(missing_ok=True)
        raise NodeError(f"{archive} was damaged ({damaged}) and has been removed: run the command again")


def _install_plugin(tree: Path, plugin_zip: Path, java_home: Path) -> None:
    env = _node_env(java_home) | {"OPENSEARCH_PATH_CONF": str(tree / "config")}
    command = [str(tree / "bin" / "opensearch-plugin"), "install", "--batch", plugin_zip.resolve().as_uri()]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NodeError(f"installing the k-NN plugin failed: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-_LOG_TAIL:])
        raise NodeError(f"installing the k-NN plugin from {plugin_zip} failed:\n{tail}")


# -- Java -------------------------------------------------------------------------------------------


def find_java(settings: Settings, home: Path | None = None) -> Path:
    """The JAVA_HOME the node runs on; the order is in the module docstring. Raises NodeError."""
    need = f"OpenSearch {settings.opensearch_version} needs Java {MIN_JAVA}+"
    if settings.java_home:
        path = Path(settings.java_home).expanduser()
        major = _java_major(path)
        if major is None:
            raise NodeError(f"java_home {path} has no working bin/java; point it at a JDK {MIN_JAVA}+")
        if major < MIN_JAVA:
            raise NodeError(f"java_home {path} is Java {major}; {need}: point it at a newer JDK")
        return path
    candidates = [Path(os.environ[var]) for var in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME") if os.environ.get(var)]
    if home is not None:
        candidates.append(home / "jdk")
    for path in candidates:
        if (_java_major(path) or 0) >= MIN_JAVA:
            return path
    found = sorted(((_java_major(path) or 0, str(path)) for path in _installed_jdks()), reverse=True)
    if found and found[0][0] >= MIN_JAVA:
        return Path(found[0][1])
    seen = ", ".join(f"Java {major} at {path}" for major, path in found if major) or "no JDK at all"
    raise NodeError(
        f"{need} and found {seen}: install a JDK {MIN_JAVA}+ (Temurin, or your distribution's "
        f"openjdk-{MIN_JAVA}-jdk-headless) or set DOCSCTL_JAVA_HOME (java_home in docsctl.toml) to one"
    )


def _installed_jdks() -> list[Path]:
    homes: dict[Path, Path] = {}
    for parent in map(Path, _JVM_DIRS):
        if parent.is_dir():
            for child in sorted(parent.iterdir()):
                home = child / "Contents" / "Home" if (child / "Contents" / "Home").is_dir() else child
                homes.setdefault(home.resolve(), home)
    on_path = shutil.which("java")
    if on_path:
        home = Path(on_path).resolve().parent.parent
        homes.setdefault(home, home)
    return [home for home in homes.values() if (home / "bin" / "java").is_file()]


@cache
def _java_major(home: Path) -> int | None:
    """The feature version of home/bin/java (8, 17, 21, 25), or None when it does not run."""
    java = home / "bin" / "java"
    if not os.access(java, os.X_OK):
        return None
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if done.returncode != 0 or not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0_392" is Java 8


# -- running the node -------------------------------------------------------------------------------


def status(settings: Settings) -> NodeStatus:
    """Ask the port and the PID file; never starts or stops anything."""
    url = node_url(settings)
    folder = node_dir(settings)
    version = health = None
    info = _identify(url, quiet=True)
    if info is not None:
        version = (info.get("version") or {}).get("number")
        health = _health(url)
    return NodeStatus(
        running=info is not None,
        pid=_live_pid(folder),
        url=url,
        version=version,
        health=health,
        data_dir=folder,
        log_file=folder / LOG_FILE,
        install_dir=install_dir(settings),
    )


def up(
    settings: Settings,
    progress: Progress | None = None,
    wait_seconds: float = 120,
    fast_start: bool = False,
    cluster: Cluster | None = None,
) -> NodeStatus:
    """Start a node on settings.opensearch_port and wait until its health is yellow or green.

    `fast_start` runs the JVM with its quick compiler only (-XX:TieredStopAtLevel=1): on 2 cores the
    node is ready in about half the time, but it searches and indexes more slowly, so it suits
    short-lived nodes (tests, CI), not the one you index a large corpus into.

    `cluster` makes the node form or join a cluster of several nodes (see Cluster); ready then also
    means it has joined one with an elected cluster manager.

    Idempotent: when OpenSearch already answers on the port (ours or not), that node's status is
    returned; when our node is still starting, this waits for it. Raises NodeError when the port is
    taken by another program, when the node dies during startup (quoting its log) or does not get
    ready within `wait_seconds` (it is then left running: `status` later, or `down`).
    """
    say = progress or _quiet
    port = settings.opensearch_port
    if not 1024 <= port < 65536:
        raise NodeError(f"port {port} cannot be used: the node runs unprivileged, so choose one in 1024-65535")
    for size in (settings.opensearch_heap_min, settings.opensearch_heap_max):
        _heap_bytes(size)  # a bad size fails now, not after a download
    url = node_url(settings)
    folder = node_dir(settings)
    if re.search(r"\s", str(folder)):
        raise NodeError(f"OpenSearch's start script cannot handle spaces in {folder}: choose another data_dir")
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / ".lock"):
        pid = _live_pid(folder)
        # While our own node starts, a slow or odd answer is no reason to give up on it.
        if _identify(url, quiet=pid is not None) is not None:
            return _wait_ready(settings, pid, wait_seconds, say)
        if pid is None:
            (folder / PID_FILE).unlink(missing_ok=True)  # stale, if there was one
            if not _port_free(port):
                raise NodeError(f"port {port} is in use by another program: choose another --port")
            home = ensure_installed(settings, say)
            java = find_java(settings, home)
            say(f"starting OpenSearch {settings.opensearch_version} on port {port} (Java {_java_major(java)})")
            pid = _launch(settings, home, java, folder, fast_start, cluster)
        return _wait_ready(settings, pid, wait_seconds, say)


def down(settings: Settings, wait_seconds: float = 60) -> bool:
    """Stop the node docsctl started on this port: SIGTERM, then SIGKILL after `wait_seconds`.

    Returns False when there was nothing to stop (a stale PID file is removed). Raises NodeError when
    an OpenSearch that docsctl did not start (with this data_dir) answers on the port.
    """
    folder = node_dir(settings)
    pid_file = folder / PID_FILE
    pid = _live_pid(folder)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        url = node_url(settings)
        if _identify(url, quiet=True) is not None:
            raise NodeError(
                f"the OpenSearch on {url} was not started by docsctl with data dir {settings.data_dir} "
                "(no live PID file there): stop it where it was started, or pass the --data-dir it was "
                "started with"
            )
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_for_exit(pid, wait_seconds):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not _wait_for_exit(pid, 15):
            raise NodeError(f"OpenSearch (pid {pid}) did not exit even after SIGKILL")
    pid_file.unlink(missing_ok=True)
    return True


def logs(settings: Settings, lines: int = 50) -> str:
    """The last `lines` lines of the node's console log (stdout and stderr of the process)."""
    log = node_dir(settings) / LOG_FILE
    if not log.is_file():
        raise NodeError(
            f"no node log at {log}: no node was started on port {settings.opensearch_port} with this "
            "data dir (docsctl opensearch up)"
        )
    return _tail(log, lines)


def _launch(
    settings: Settings, home: Path, java: Path, folder: Path, fast_start: bool, cluster: Cluster | None = None
) -> int:
    """Start bin/opensearch detached, in its own session, output to node.log; return its PID."""
    for name in ("data", "logs", "tmp"):
        (folder / name).mkdir(exist_ok=True)
    config = _prepare_config(home, folder)
    log = folder / LOG_FILE
    if log.exists():
        os.replace(log, folder / f"{LOG_FILE}.1")
    port = settings.opensearch_port
    heap_max = _heap(settings.opensearch_heap_max)
    heap_min = min(_heap(settings.opensearch_heap_min), heap_max, key=_heap_bytes)
    discovery = [
        "-Ediscovery.type=single-node",
        # One node: replicas could never be assigned, so new indices would stay yellow.
        "-Ecluster.default_number_of_replicas=0",
    ]
    if cluster is not None:
        discovery = [f"-Ediscovery.seed_hosts={','.join(cluster.seed_hosts)}"] if cluster.seed_hosts else []
        if cluster.initial_cluster_manager_nodes:
            discovery.append(
                f"-Ecluster.initial_cluster_manager_nodes={','.join(cluster.initial_cluster_manager_nodes)}"
            )
    transport = cluster.transport_port if cluster is not None and cluster.transport_port else _transport_port(port)
    command = [
        *_unprivileged_prefix(),
        str(home / "bin" / "opensearch"),
        f"-Ecluster.name={cluster.name if cluster is not None else f'docsctl-{port}'}",
        f"-Enode.name={node_name(settings)}",
        f"-Enetwork.host={HOST}",
        f"-Ehttp.port={port}",
        f"-Etransport.port={transport}",
        *discovery,
        f"-Epath.data={folder / 'data'}",
        f"-Epath.logs={folder / 'logs'}",
        # A nearly full disk must not turn indices read-only: this is a laptop or CI, not a cluster.
        "-Ecluster.routing.allocation.disk.threshold_enabled=false",
    ]
    env = _node_env(java) | {
        "OPENSEARCH_PATH_CONF": str(config),
        "OPENSEARCH_TMPDIR": str(folder / "tmp"),
        "OPENSEARCH_JAVA_OPTS": f"-Xms{heap_min} -Xmx{heap_max}" + (" -XX:TieredStopAtLevel=1" if fast_start else ""),
        "DOCSCTL_NODE_LOG": str(log),
    }
    # sh puts the node in the background and exits: the node is nobody's child, so it outlives us
    # and never lingers as our zombie. `$!` is the node's PID, as unshare and bin/opensearch exec.
    script = '"$@" >"$DOCSCTL_NODE_LOG" 2>&1 </dev/null & echo $!'
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", script, "sh", *command],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,
        )
        pid = int(done.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise NodeError(f"could not start {home / 'bin' / 'opensearch'}: {exc}") from None
    pid_file = folder / PID_FILE
    pid_file.with_suffix(".tmp").write_text(f"{pid}\n")
    os.replace(pid_file.with_suffix(".tmp"), pid_file)
    return pid


def _wait_ready(settings: Settings, pid: int | None, wait_seconds: float, say: Progress) -> NodeStatus:
    url, port = node_url(settings), settings.opensearch_port
    folder = node_dir(settings)
    started = time.monotonic()
    health = None
    while True:
        if pid is not None and not pid_alive(pid):
            (folder / PID_FILE).unlink(missing_ok=True)
            raise NodeError(f"OpenSearch exited while starting; the end of {folder / LOG_FILE}:\n{_log_tail(folder)}")
        if _identify(url, quiet=True) is not None:
            health = _health(url, wait="1s")
            if health in ("green", "yellow"):
                return status(settings)
        elapsed = time.monotonic() - started
        if elapsed > wait_seconds:
            what = (
                f"the node (pid {pid}) is left running: see `docsctl opensearch status --port {port}`, or "
                f"stop it with `docsctl opensearch down --port {port}`, with the same --data-dir if one was given"
            )
            if pid is None:
                what = f"health is {health}" if health else "it does not answer"
            raise NodeError(
                f"OpenSearch on {url} was not ready after {wait_seconds:.0f} s ({what}); "
                f"the end of {folder / LOG_FILE}:\n{_log_tail(folder)}"
            )
        say(f"waiting for OpenSearch on {url} ({elapsed:.0f} s)")
        time.sleep(0.5)


def _prepare_config(home: Path, folder: Path) -> Path:
    """A fresh copy of the install's config/ for this node; its keystore is kept across starts."""
    config = folder / "config"
    for source in (home / "config").rglob("*"):
        target = config / source.relative_to(home / "config")
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif source.name != "opensearch.keystore":
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    jvm_options = config / "jvm.options"
    text = jvm_options.read_text(encoding="utf-8")
    for relative, absolute in (
        ("file=logs/gc.log", f"file={folder / 'logs' / 'gc.log'}"),
        ("-XX:HeapDumpPath=data", f"-XX:HeapDumpPath={folder / 'data'}"),
        ("-XX:ErrorFile=logs/", f"-XX:ErrorFile={folder / 'logs'}/"),
    ):
        text = text.replace(relative, absolute)
    jvm_options.write_text(text, encoding="utf-8")
    return config


def _node_env(java_home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"JAVA_TOOL_OPTIONS", "OPENSEARCH_HOME"}}
    env["OPENSEARCH_JAVA_HOME"] = str(java_home)
    return env


@lru_cache(maxsize=1)
def _unprivileged_prefix() -> tuple[str, ...]:
    """Nothing for an ordinary user; for root, a user namespace in which the node is not root."""
    if os.geteuid() != 0:
        return ()
    unshare = shutil.which("unshare")
    if unshare:
        prefix = (unshare, "--user", f"--map-user={_NAMESPACE_UID}", f"--map-group={_NAMESPACE_UID}")
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0:
                return prefix
    raise NodeError(
        "OpenSearch refuses to run as root, and this machine does not allow the user namespace docsctl "
        "would start it in (`unshare --user` failed): run docsctl as an ordinary user"
    )


def _heap(size: str) -> str:
    _heap_bytes(size)
    return size.strip()


def _heap_bytes(size: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)\s*", size)
    if not match:
        raise NodeError(f"heap size {size!r} is not like 512m or 2g")
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]


# -- processes, ports, HTTP -------------------------------------------------------------------------


def _live_pid(folder: Path) -> int | None:
    """The PID in the node's PID file if that process is alive and is this node; else None."""
    try:
        pid = int((folder / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    try:  # guards against a reused PID: the node's command line names its own data folder
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return pid if not Path("/proc/self").exists() else None  # no /proc (macOS): trust the file
    except OSError:
        return pid
    return pid if os.fsencode(f"-Epath.data={folder / 'data'}") in arguments else None


def _wait_for_exit(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _transport_port(http_port: int) -> int:
    """Node-to-node port, unused by a single node but always bound: http + 100 if free, else any."""
    preferred = http_port + 100
    return preferred if preferred < 65536 and _port_free(preferred) else _free_port()


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never proxy 127.0.0.1


def _open_url(url: str, timeout: float) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "docsctl"})
    opener = _OPENER if url.startswith(f"http://{HOST}") else urllib.request.build_opener()
    return opener.open(request, timeout=timeout)


def _get_json(url: str, timeout: float) -> Any:
    with _open_url(url, timeout) as response:
        return json.loads(response.read())


def _identify(url: str, quiet: bool = False, timeout: float = 5) -> dict[str, Any] | None:
    """OpenSearch's root document from `url`, or None when nothing listens there.

    When something that is not plain-HTTP OpenSearch answers, raise NodeError, or with `quiet`
    return None.
    """
    try:
        info = _get_json(url + "/", timeout)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return None
        problem = str(exc)
    except ConnectionRefusedError:
        return None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    else:
        if isinstance(info, dict) and (info.get("version") or {}).get("distribution") == "opensearch":
            return info
        problem = "its answer to GET / is not OpenSearch's"
    if quiet:
        return None
    port = url.rsplit(":", 1)[1]
    raise NodeError(
        f"port {port} is taken by something that is not a plain-HTTP OpenSearch ({problem}): choose another --port"
    )


def _health(url: str, wait: str | None = None) -> str | None:
    query = f"?wait_for_status=yellow&timeout={wait}" if wait else ""
    try:
        return _get_json(f"{url}/_cluster/health{query}", timeout=10).get("status")
    except urllib.error.HTTPError as exc:  # 408 when wait_for_status timed out: the body still says
        with contextlib.suppress(ValueError, OSError):
            return json.loads(exc.read()).get("status")
        return None
    except (OSError, ValueError, AttributeError, urllib.error.URLError, http.client.HTTPException):
        return None


# -- small helpers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock, held by this process for the block; released on any exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tail(path: Path, lines: int) -> str:
    if lines <= 0:
        return ""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        data, step = b"", 8192
        while end > 0 and data.count(b"\n") <= lines:
            start = max(0, end - step)
            handle.seek(start)
            data = handle.read(end - start) + data
            end, step = start, step * 2
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _log_tail(folder: Path) -> str:
    """The end of node.log for an error message, without stack frames and JVM warnings."""
    log = folder / LOG_FILE
    if not log.is_file():
        return "(no log)"
    lines = [line[:400] for line in _tail(log, 400).splitlines() if not _NOISE.match(line)]
    return "\n".join(lines[-_LOG_TAIL:]) or "(empty log)"


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text).strip()
