"""The fault suite's own dependencies, which its scenarios stop, restart and fill: a
PostgreSQL cluster, a Redis server and a size-limited volume.

The machine's shared PostgreSQL (5432) and Redis (6379) serve the other xdist
worker's tests at the same time, so the suite never touches them: each
dependency here is started for the suite alone, on a port of its own, in a
temporary folder, and removed afterwards. PostgreSQL refuses to run as root, so
its programs run as the ``postgres`` OS user (``runuser``), in a folder that
user owns outside pytest's root-only temporary tree.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

#: The OS user PostgreSQL's programs run as.
POSTGRES_USER = "postgres"
#: How long a server may take to start or stop.
START_TIMEOUT_S = 60


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's program folder (Debian's layout), if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parts[-3]))
    return Path(found[-1]).parent if found else None


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", POSTGRES_USER, "--", *argv]


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own on ``port``: initialised, started,
    stopped and started again at will, removed at the end.

    ``fsync`` is off (the scenarios kill processes, never the machine, so what a
    commit wrote is in the OS's cache); commits stay synchronous, so an
    ``immediate`` stop loses nothing a client was told is committed.
    """

    def __init__(self, name: str, port: int) -> None:
        binaries = postgres_bin()
        if binaries is None:
            raise RuntimeError("PostgreSQL's programs are not installed (apt-get install "
                               "postgresql)")
        self.name = name
        self.port = port
        self.bin = binaries
        self.root = Path(tempfile.mkdtemp(prefix=f"spate-faults-{name}-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        shutil.chown(self.root, POSTGRES_USER, POSTGRES_USER)
        self.root.chmod(0o700)

    def initialise(self) -> subprocess.Popen[bytes]:
        """Start ``initdb`` (trust authentication, the ``postgres`` superuser); the caller
        waits for it, so that several clusters initialise at once."""
        return subprocess.Popen(
            _as_postgres([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                          "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        options = (f"-c port={self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.root} -c fsync=off "
                   "-c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB")
        self._pg_ctl("start", "-l", str(self.log), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """``fast``: sessions are ended cleanly; ``immediate``: the server quits at once,
        as in a crash (recovery runs at the next start)."""
        self._pg_ctl("stop", "-m", mode)

    def running(self) -> bool:
        done = subprocess.run(_as_postgres([str(self.bin / "pg_ctl"), "status", "-D",
                                            str(self.data)]), capture_output=True, check=False)
        return done.returncode == 0

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, database: str) -> str:
        """A new database of the cluster; its URL."""
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        return self.url(database)

    def remove(self) -> None:
        """Stop the server (if it runs) and delete its folder."""
        if self.data.exists() and self.running():
            with contextlib.suppress(RuntimeError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, *args: str) -> None:
        done = subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t",
                          str(START_TIMEOUT_S), *args]),
            capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {args[0]} of the {self.name} cluster failed: "
                               f"{done.stderr.decode(errors='replace')}\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


def initialise_all(clusters: list[PrivatePostgres]) -> None:
    """``initdb`` every cluster at once, then start each."""
    for cluster, process in [(cluster, cluster.initialise()) for cluster in clusters]:
        _, stderr = process.communicate(timeout=START_TIMEOUT_S)
        if process.returncode != 0:
            raise RuntimeError(f"initdb of the {cluster.name} cluster failed: "
                               f"{stderr.decode(errors='replace')}")
        cluster.start()


class PrivateRedis:
    """A ``redis-server`` of the suite's own on ``port``, in memory only (a restart
    empties it, as a broker restarted without persistence is)."""

    def __init__(self, port: int, folder: Path) -> None:
        self.port = port
        self.folder = folder
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.folder / "redis.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.folder)],
                stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server on port {self.port} did not start"
                                           ) from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(START_TIMEOUT_S)
        self.process = None


class SmallVolume:
    """A tmpfs of ``size_mb`` mounted at ``path``: a storage volume that can be filled."""

    FILLER = ".faults-filler"

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb
        self.mounted = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0700",
                        "spate-faults", str(self.path)], check=True, capture_output=True)
        self.mounted = True

    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self) -> None:
        """Write a file until the volume has no byte left."""
        chunk = b"\0" * (1024 * 1024)
        with open(self.path / self.FILLER, "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(chunk[:max(1, min(len(chunk), self.free_bytes()))])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise

    def free(self) -> None:
        (self.path / self.FILLER).unlink(missing_ok=True)

    def unmount(self) -> None:
        if not self.mounted:
            return
        done = subprocess.run(["umount", str(self.path)], capture_output=True, check=False)
        if done.returncode != 0:  # something still holds it: detach now, free when let go
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
        self.mounted = False


@dataclass
class Servers:
    """The suite's private dependencies: the control plane's database, the state store
    and the scheduler's broker."""

    control: PrivatePostgres
    state: PrivatePostgres
    broker: PrivateRedis
