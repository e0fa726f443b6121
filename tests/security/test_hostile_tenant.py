"""A hostile tenant against a real ``spate serve``: every attack of the tenant-isolation
issue, and the variants a careful attacker would try next, must fail and leak nothing.

Attacks on files and the network are refused at planning, with the place in
the SQL; what planning cannot see (a host name that resolves inside) is
refused when the job connects, from inside the job's sandbox. Jobs that do
run are checked from the outside: their user, their environment, their files.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import os
import socket
import stat
import sys
import time
from typing import Any

import httpx
import psutil
import pytest
import redis

from tests.api.serving import sse_events, wait_for
from tests.security.conftest import ALLOWED_REDIS, Hosted, Tenant

pytestmark = pytest.mark.e2e

RAW_SOURCE = """CREATE TABLE f (value TEXT) WITH (connector = 'single_file',
    path = '{path}', format = 'raw_string', type = 'source');
SELECT value FROM f;
"""
SINK = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10', message_count = '3');
CREATE TABLE out WITH (connector = 'single_file', path = '{path}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT counter FROM src;
"""
POSTGRES_LOOKUP = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');
CREATE TEMPORARY TABLE secrets (id BIGINT PRIMARY KEY, leaked TEXT) WITH (
    connector = 'postgres', url = 'postgresql://postgres@{host}:{port}/{database}',
    query = 'SELECT 1::bigint AS id, secrets::text AS leaked FROM connection_profiles');
SELECT s.leaked FROM src LEFT JOIN secrets s ON s.id = src.counter;
"""
REDIS_LOOKUP = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');
CREATE TEMPORARY TABLE kv (k TEXT PRIMARY KEY, value TEXT) WITH (connector = 'redis',
    address = '{address}', format = 'raw_string');
SELECT kv.value FROM src LEFT JOIN kv ON kv.k = CAST(src.counter AS TEXT);
"""


def validate(hosted: Hosted, tenant: Tenant, sql: str) -> dict[str, Any]:
    with hosted.http() as http:
        response = http.post("/pipelines/validate", json={"sql": sql},
                             headers=tenant.auth("viewer"))
    assert response.status_code == 200, response.text
    return dict(response.json())


def refused_at(answer: dict[str, Any], words: str) -> tuple[int, int]:
    assert answer["valid"] is False, answer
    diagnostic = answer["diagnostics"][0]
    assert words in diagnostic["message"], diagnostic
    return diagnostic["line"], diagnostic["column"]


# -- files ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/etc/passwd", "/etc/shadow", "/proc/self/environ", "../x", "a/../../x", "~/x",
    "file:///etc/passwd", "//etc/passwd",
])
def test_paths_out_of_the_storage_root_are_refused_with_their_place(hosted: Hosted,
                                                                    path: str) -> None:
    for sql in (RAW_SOURCE.format(path=path), SINK.format(path=path)):
        line, _column = refused_at(validate(hosted, hosted.b, sql), "outside your storage")
        assert line == sql.splitlines().index(
            next(s for s in sql.splitlines() if "path =" in s)) + 1


def test_the_servers_own_files_and_other_tenants_cannot_be_named(hosted: Hosted) -> None:
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    targets = [os.path.join(site_packages, "evil.pth"), str(hosted.data_dir / "secret.key"),
               str(hosted.data_dir / "admin.key"), str(hosted.storage_root(hosted.a) / "x"),
               f"../{hosted.a.id}/x", f"../../jobs/{hosted.a.id}/spec.json"]
    with hosted.http() as http:
        for path in targets:
            refused_at(validate(hosted, hosted.b, SINK.format(path=path)),
                       "outside your storage")
            created = http.post("/pipelines", headers=hosted.b.auth("developer"),
                                json={"name": "evil", "sql": SINK.format(path=path)})
            assert created.status_code == 400, created.text
            previewed = http.post("/pipelines/preview", headers=hosted.b.auth("developer"),
                                  json={"sql": RAW_SOURCE.format(path=path)})
            assert previewed.status_code == 400, previewed.text
    assert not os.path.exists(os.path.join(site_packages, "evil.pth"))


def test_a_link_out_of_the_storage_root_is_refused(hosted: Hosted) -> None:
    root = hosted.storage_root(hosted.b)
    link = root / "etc"
    if not link.is_symlink():
        link.symlink_to("/etc")
    refused_at(validate(hosted, hosted.b, RAW_SOURCE.format(path="etc/passwd")),
               "outside your storage")


def test_the_test_endpoint_tells_nothing_about_files_outside(hosted: Hosted) -> None:
    answers = []
    with hosted.http() as http:
        for name, path in (("shadow", "/etc/shadow"), ("missing", "/etc/no-such-file"),
                           ("up", "../../secret.key")):
            created = http.post("/connection-profiles", headers=hosted.b.auth("developer"),
                                json={"name": f"probe-{name}", "connector": "single_file",
                                      "config": {"path": path, "format": "json"}})
            assert created.status_code == 201, created.text
            checked = http.post(f"/connection-profiles/probe-{name}/test",
                                headers=hosted.b.auth("developer"))
            assert checked.status_code == 200, checked.text
            answers.append((checked.json()["ok"], checked.json()["message"].replace(path, "P")))
    assert {ok for ok, _ in answers} == {False}
    assert len({message for _, message in answers}) == 1, answers


# -- network -------------------------------------------------------------------


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.1", "0x7f000001", "2130706433", "localhost", "[::1]",
    "[::ffff:127.0.0.1]", "0.0.0.0", "169.254.169.254", "10.0.0.1", "192.168.1.1",
])
def test_internal_destinations_are_refused_at_planning(hosted: Hosted, host: str) -> None:
    sql = POSTGRES_LOOKUP.format(host=host, port=5432, database="postgres")
    line, _ = refused_at(validate(hosted, hosted.b, sql), "egress policy")
    assert line == 3  # the url option
    redis_sql = REDIS_LOOKUP.format(address=f"redis://{host}:6380/0")
    refused_at(validate(hosted, hosted.b, redis_sql), "egress policy")


def test_sockets_on_the_jobs_machine_are_refused(hosted: Hosted) -> None:
    refused_at(validate(hosted, hosted.b, REDIS_LOOKUP.format(
        address="unix:///var/run/redis/redis.sock")), "local sockets")
    socket_url = POSTGRES_LOOKUP.replace(
        "postgresql://postgres@{host}:{port}/{database}", "host=/var/run/postgresql dbname=x")
    refused_at(validate(hosted, hosted.b, socket_url), "local sockets")


def test_the_allow_list_opens_only_what_it_names(hosted: Hosted) -> None:
    allowed = REDIS_LOOKUP.format(address=f"redis://{ALLOWED_REDIS}/9")
    assert validate(hosted, hosted.b, allowed)["valid"] is True
    other_port = POSTGRES_LOOKUP.format(host="127.0.0.1", port=5432, database="spate")
    refused_at(validate(hosted, hosted.b, other_port), "egress policy")


def _private_name() -> str | None:
    """A name of this machine that resolves to a private or loopback address."""
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(name, 5432)}
        except OSError:
            continue
        if addresses and all(not ipaddress.ip_address(a.split("%")[0]).is_global
                             for a in addresses):
            return name
    return None


@pytest.mark.spark
def test_a_name_resolving_inside_is_refused_when_the_job_connects(hosted: Hosted) -> None:
    name = _private_name()
    if name is None:
        pytest.skip("this machine's name resolves to a public address")
    sql = POSTGRES_LOOKUP.format(host=name, port=5432, database="postgres")
    assert validate(hosted, hosted.b, sql)["valid"] is True  # a name: checked at connect
    events = _preview(hosted, hosted.b, sql)
    errors = [data for event, data in events if event == "error"]
    assert errors, events
    message = str(errors[0])
    assert "egress policy" in message
    assert "Connection refused" not in message and "does not exist" not in message
    assert not [data for event, data in events if event == "rows"]


def _preview(hosted: Hosted, tenant: Tenant, sql: str) -> list[tuple[str, Any]]:
    received: list[tuple[str, Any]] = []
    with httpx.Client(base_url=hosted.serve.url + "/api/v1", timeout=300) as http, \
            http.stream("POST", "/pipelines/preview", headers=tenant.auth("developer"),
                        json={"sql": sql, "limit": 5, "timeout_s": 240}) as response:
        assert response.status_code == 200, response.read()
        for event in sse_events(response):
            received.append(event)
            if event[0] == "end":
                break
    return received


# -- the job's sandbox, seen from outside ------------------------------------------


@pytest.mark.spark
def test_a_job_runs_as_the_tenant_with_nothing_of_the_server_and_its_allowed_lookup_works(
        hosted: Hosted, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/9")
    marker = f"value-{os.getpid()}"
    client.mset({str(i): f"{marker}-{i}" for i in range(200)})
    sql = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '5');\n"
           "CREATE TEMPORARY TABLE kv (k TEXT PRIMARY KEY, value TEXT) WITH (connector = 'redis', "
           f"address = 'redis://{ALLOWED_REDIS}/9', format = 'raw_string');\n"
           "CREATE TABLE out WITH (connector = 'single_file', path = 'out/rows.jsonl', "
           "format = 'json', type = 'sink');\n"
           "INSERT INTO out SELECT src.counter, kv.value FROM src "
           "JOIN kv ON kv.k = CAST(src.counter AS TEXT);\n")
    out = hosted.storage_root(hosted.a) / "out" / "rows.jsonl"
    with hosted.http() as http:
        created = http.post("/pipelines", headers=hosted.a.auth("developer"),
                            json={"name": "sandboxed", "sql": sql})
        assert created.status_code == 201, created.text
        try:
            wait_for("looked-up rows", lambda: out.exists() and marker in out.read_text(),
                     timeout_s=300)
            job = http.get("/pipelines/sandboxed", headers=hosted.a.auth()).json()["job"]
            # The job is a query of its tenant's warm application: that process runs it.
            process = _application_process(hosted.a.id)
            uid = process.uids().real
            assert uid not in (0, os.getuid())
            assert out.stat().st_uid == uid  # written by the tenant's user, in its root
            environment = process.environ()
            assert not [key for key in environment if key.startswith("SPATE_")]
            assert PLATFORM_KEY_MARK not in str(environment)
            job_dir = hosted.data_dir / "applications" / hosted.a.id / "jobs" / job["id"]
            assert job_dir.is_dir()
            assert not (job_dir / "spec.json").exists()  # read and removed at start
            assert stat.S_IMODE(job_dir.stat().st_mode) == 0o700
        finally:
            http.delete("/pipelines/sandboxed?force=true", headers=hosted.a.auth("developer"))
    client.flushdb()
    client.close()


#: Every key of the platform starts so: none may appear in a job's environment.
PLATFORM_KEY_MARK = "pk-"


def _application_process(tenant_id: str) -> psutil.Process:
    """The Python process of the tenant's warm application (not its launchers)."""
    def find() -> psutil.Process | None:
        for process in psutil.process_iter(["cmdline"]):
            command = " ".join(process.info["cmdline"] or [])
            if "spate.engine.host.main" in command and tenant_id in command \
                    and "setpriv" not in command and "bwrap" not in command:
                return process
        return None

    found = wait_for(f"the application of tenant {tenant_id}", find, timeout_s=60)
    assert isinstance(found, psutil.Process)
    return found


# -- the control plane -----------------------------------------------------------


def test_a_validate_flood_leaves_other_tenants_answered(hosted: Hosted) -> None:
    added = "+".join(["c"] * 60_000)  # 120 KB: within the API's 200 KB limit
    flood_sql = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
                 f"SELECT {added} AS total FROM (SELECT counter AS c FROM src);\n")

    def flood() -> int:
        with hosted.http() as http:
            return http.post("/pipelines/validate", json={"sql": flood_sql},
                             headers=hosted.b.auth("viewer")).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        flooding = [pool.submit(flood) for _ in range(20)]
        answered = []
        with hosted.http() as http:
            while not all(f.done() for f in flooding):
                answered.append(http.get("/me", headers=hosted.a.auth("viewer")).status_code)
                time.sleep(0.05)
        statuses = [f.result() for f in flooding]
    assert answered and set(answered) == {200}
    assert set(statuses) <= {200, 422, 429}, statuses


def test_nul_characters_are_refused_before_postgresql_sees_them(hosted: Hosted) -> None:
    with hosted.http() as http:
        for body in ({"name": "a\u0000b", "sql": SINK.format(path="o.json")},
                     {"name": "ok", "description": "\u0000", "sql": SINK.format(path="o.json")},
                     {"name": "ok", "sql": SINK.format(path="o.json") + "-- \u0000"}):
            response = http.post("/pipelines", json=body, headers=hosted.b.auth("developer"))
            assert response.status_code == 422, response.text
            assert response.json()["error"]["code"] == "invalid_text"
    assert "Traceback" not in hosted.serve.log()


def test_the_admin_key_is_only_in_its_private_file(hosted: Hosted) -> None:
    assert hosted.serve.key_file is not None
    assert stat.S_IMODE(hosted.serve.key_file.stat().st_mode) == 0o600
    printed = "".join(hosted.serve.stdout_lines)
    assert hosted.serve.admin_key not in printed and "spate_" not in printed
    assert hosted.serve.admin_key not in hosted.serve.log()


def test_the_servers_files_are_owner_only(hosted: Hosted) -> None:
    for path in (hosted.data_dir / "secret.key", hosted.data_dir / "admin.key"):
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for folder in (hosted.data_dir, hosted.data_dir / "jobs"):
        if folder.exists():
            assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, folder
