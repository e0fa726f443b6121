"""Lookups under a tenant's egress policy, against the real Redis and PostgreSQL: the
destination connected to is the one the policy checked, and a failed connect reads the
same whatever the server answered.

The local servers play a tenant's own servers: the policy allow-lists 127.0.0.1,
as an operator would allow-list them with ``SPATE_EGRESS_ALLOW``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy, Endpoint, literal_address
from spate.engine.connectors.core.lookup import LookupSource
from spate.engine.connectors.redis.lookup import RedisLookup
from tests.engine.lookup.support import PgTable, lookup_table
from tests.ports import free_port

pytestmark = pytest.mark.e2e

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("value", T.StringType()))
#: A name only the policy's resolver knows: reaching it proves the checked address is used.
TENANT_NAME = "tenant-redis.invalid"


def policy(allow: str = "127.0.0.1", names: dict[str, str] | None = None,
           control_plane: tuple[Endpoint, ...] = ()) -> EgressPolicy:
    """An egress policy allowing ``allow``, resolving ``names`` itself (others: as
    addresses only, so no test depends on this machine's DNS)."""
    known = names or {}

    def resolve(host: str, port: int) -> list[Any]:
        if host in known:
            return [ipaddress.ip_address(known[host])]
        address = literal_address(host)
        if address is None:
            raise socket.gaierror("no such name")
        return [address]

    return EgressPolicy(EgressPolicy.from_config([allow], ()).allow, control_plane,
                        resolver=resolve)


def confined(connector: str, egress: EgressPolicy | None = None,
             **options: Any) -> TableConfig:
    table = lookup_table(connector, COLUMNS, ("id",), **options)
    return replace(table, boundary=Boundary(egress=egress or policy()))


def open_lookup(table: TableConfig) -> LookupSource:
    return CONNECTORS[table.connector].create_lookup(table)


def failure(table: TableConfig) -> str:
    """The message a fetch from ``table`` fails with, its destination written HOST:PORT."""
    source = open_lookup(table)
    try:
        with pytest.raises(ConnectorError) as caught:
            source.fetch([(1,)])
    finally:
        source.close()
    return re.sub(r"127\.0\.0\.1:[0-9]+", "HOST:PORT", str(caught.value))


# -- what is connected to is what was checked ------------------------------------------


@pytest.mark.parametrize("address, words", [
    ("redis://127.0.0.1/0?port=6380", "URL option 'port'"),
    ("redis://127.0.0.1:6379/0?host=10.0.0.1", "URL option 'host'"),
    ("redis://127.0.0.1:6379/0?unix_socket_path=/var/run/redis/redis.sock",
     "URL option 'unix_socket_path'"),
    ("rediss://127.0.0.1:6379/0?ssl_cert_reqs=none", "verifies the server's certificate"),
    ("rediss://127.0.0.1:6379/0?ssl_check_hostname=false", "verifies the server's certificate"),
    ("redis://127.0.0.1:6379/0?password=x", "give credentials in the address"),
    ("redis://127.0.0.1:6379/0?socket_timeout=1", "only the database may follow"),
    ("redis://127.0.0.1:6379/?db=1&db=2", "'db' twice"),
    ("redis://127.0.0.1:6379/1?db=2", "gives the database twice"),
    ("redis://127.0.0.1:6379/1/2", "must end with a database number"),
])
def test_redis_url_options_that_would_move_the_connection_are_refused(address: str,
                                                                      words: str) -> None:
    # The policy allows this Redis only: an option sending the client elsewhere (or
    # loosening TLS) must not pass on the strength of the address's host and port.
    with pytest.raises(ConnectorError, match=words) as caught:
        CONNECTORS["redis"].read_settings(confined("redis", policy("127.0.0.1:6379"),
                                                   address=address, format="raw_string"))
    assert caught.value.option == "address"


def test_a_database_number_is_checked_as_the_server_reads_it() -> None:
    settings = CONNECTORS["redis"].read_settings
    # '/00' is database 0 to Redis: the control plane's database 0 stays refused.
    control = policy(control_plane=(Endpoint("127.0.0.1", 6379, "0"),))
    for address in ("redis://127.0.0.1:6379/00", "redis://127.0.0.1:6379/?db=0",
                    "redis://127.0.0.1:6379"):
        with pytest.raises(ConnectorError, match="egress policy"):
            settings(confined("redis", control, address=address, format="raw_string"))
    settings(confined("redis", control, address="redis://127.0.0.1:6379/05",
                      format="raw_string"))


def test_redis_connects_to_the_address_the_policy_resolved(redis_prefix: str,
                                                           redis_client: redis.Redis) -> None:
    redis_client.set(f"{redis_prefix}1", "found")
    table = confined("redis", policy("127.0.0.1:6379", {TENANT_NAME: "127.0.0.1"}),
                     address=f"redis://{TENANT_NAME}:6379/0", format="raw_string",
                     key__prefix=redis_prefix)
    source = open_lookup(table)
    assert isinstance(source, RedisLookup)
    try:
        # The name resolves nowhere but in the policy: the client used its answer.
        assert source.fetch([(1,), (2,)]).to_pylist() == [{"id": 1, "value": "found"}]
        # RESP2: the server cannot push the client to another host ("node moved").
        assert "resp=2" in source.client.execute_command("CLIENT", "INFO").decode()
    finally:
        source.close()


def test_postgres_environment_defaults_cannot_move_a_confined_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # libpq fills what the URL leaves out from the job's environment; the policy
    # checked port 5432 and the database 'postgres' (the user's name).
    monkeypatch.setenv("PGPORT", str(free_port()))
    monkeypatch.setenv("PGDATABASE", "test")
    table = confined("postgres", url="postgresql://postgres@127.0.0.1",
                     query="SELECT 1::bigint AS id, current_database() AS value")
    source = open_lookup(table)
    try:
        assert source.fetch([(1,)]).to_pylist() == [{"id": 1, "value": "postgres"}]
    finally:
        source.close()


# -- failures to connect read alike ----------------------------------------------------


def test_failed_connects_read_the_same_whatever_the_cause(pg_table: PgTable) -> None:
    name = pg_table("id BIGINT PRIMARY KEY, value TEXT", [(1, "x")])
    free = free_port()
    causes = {
        "redis refused port": confined("redis", address=f"redis://127.0.0.1:{free}/0",
                                       format="raw_string"),
        "redis unknown user": confined("redis", address="redis://nobody:p4ss@127.0.0.1:6379/0",
                                       format="raw_string"),
        "redis bad database index": confined("redis", address="redis://127.0.0.1:6379/99",
                                             format="raw_string"),
        "postgres refused port": confined(
            "postgres", url=f"postgresql://postgres@127.0.0.1:{free}/test", table=name),
        "postgres unknown role": confined(
            "postgres", url="postgresql://nobody_zq@127.0.0.1:5432/test", table=name),
        "postgres unknown database": confined(
            "postgres", url="postgresql://postgres@127.0.0.1:5432/no_such_db_zq", table=name),
    }
    messages = {cause: failure(table) for cause, table in causes.items()}
    assert len(set(messages.values())) == 1, messages
    message = next(iter(messages.values()))
    assert message.startswith("lookup table 'lk': could not connect to HOST:PORT"), message
    for tell in ("refused", "does not exist", "DB index", "WRONGPASS", "p4ss", "nobody"):
        assert tell not in message.replace("refused the connection", ""), (tell, message)


# -- TLS: the checked address, the written name's certificate ---------------------------


@dataclass
class TlsRedis:
    port: int
    ca_file: Path


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    """A real redis-server speaking TLS only, with a certificate for 'redis.test'
    signed by a throwaway authority."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    folder = tmp_path_factory.mktemp("tls-redis")
    ca_file, cert_file, key_file = _certificates(folder, "redis.test")
    port = free_port()
    process = subprocess.Popen(
        [server, "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert_file),
         "--tls-key-file", str(key_file), "--tls-auth-clients", "no", "--save", "",
         "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if not _listening(port):
            pytest.skip("redis-server cannot serve TLS on this host")
        yield TlsRedis(port, ca_file)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def _listening(port: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def _certificates(folder: Path, name: str) -> tuple[Path, Path, Path]:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "spate test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(hours=1))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return files


def test_tls_connects_to_the_checked_address_and_verifies_the_written_name(
        tls_redis: TlsRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    # The job trusts the public authorities; here the throwaway one plays them.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_redis.ca_file))
    names = {"redis.test": "127.0.0.1", "impostor.test": "127.0.0.1"}
    egress = policy(f"127.0.0.1:{tls_redis.port}", names)
    good = confined("redis", egress, address=f"rediss://redis.test:{tls_redis.port}/0",
                    format="raw_string")
    source = open_lookup(good)
    try:
        assert source.fetch([(1,)]).num_rows == 0  # connected, verified, asked
    finally:
        source.close()
    # The same server under another name: its certificate does not name it.
    impostor = confined("redis", egress, address=f"rediss://impostor.test:{tls_redis.port}/0",
                        format="raw_string")
    message = failure(impostor)
    assert f"could not connect to impostor.test:{tls_redis.port}" in message
