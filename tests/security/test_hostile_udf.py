"""A hostile tenant's Python UDF against a real ``spate serve``: the API never runs the
file, and where it does run — in the tenant's sandboxed compute unit — it gets the
sandbox's answers, not the host's.

The UDF, stored through ``/udfs`` and called by a pipeline, reads a file every host
user may read, reads the host's shadow file, connects to the canary listener and to
the control plane's PostgreSQL (both refused by the egress policy), and forks a child
that looks for the server's process. Its module also tries, when loaded, to write a
marker file on the host. Each probe's result lands in the pipeline's output, read
here from the tenant's storage root; the same probes run here, on the host, first, so
the test shows the answers differ.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from pathlib import Path

import pytest

from tests.api.serving import wait_for
from tests.security.conftest import Canaries, Hosted

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

PROBE = '''\
import os
import socket
from pathlib import Path

from spate.engine.udf import udf

try:  # run when the module is loaded: never by the API, only in the sandbox
    Path({marker!r}).write_text("loaded")
except OSError:
    pass


def _read(path: str) -> str:
    try:
        Path(path).read_text()
        return "read"
    except OSError as error:
        return type(error).__name__


def _connect(port: int) -> str:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "connected"
    except OSError as error:
        return type(error).__name__


def _the_server_seen_from_a_child() -> str:
    child = os.fork()
    if child == 0:
        try:
            os.kill({server_pid}, 0)
            seen = Path("/proc/{server_pid}/cmdline").read_bytes()
            os._exit(0 if b"serve" in seen else 6)
        except ProcessLookupError:
            os._exit(3)
        except PermissionError:
            os._exit(4)
        except BaseException:
            os._exit(5)
    _, status = os.waitpid(child, 0)
    return {{0: "server", 3: "ProcessLookupError", 4: "PermissionError",
             6: "another process"}}.get(os.waitstatus_to_exitcode(status), "error")


@udf
def probe(n: int) -> str:
    return ";".join([
        "file=" + _read({host_file!r}), "shadow=" + _read("/etc/shadow"),
        "canary=" + _connect({canary_port}), "postgres=" + _connect(5432),
        "fork=" + _the_server_seen_from_a_child(),
    ])
'''
PIPELINE = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10', message_count = '1');
CREATE TABLE out WITH (connector = 'single_file', path = '{path}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT probe(counter) AS answers FROM src;
"""


def _host_answers(host_file: Path, canary_port: int) -> dict[str, str]:
    """What the probes get on the host (as the test's own user)."""
    def connect(port: int) -> str:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return "connected"
        except OSError as error:
            return type(error).__name__
    return {"file": "read" if host_file.read_text() else "empty",
            "shadow": "exists" if Path("/etc/shadow").exists() else "absent",
            "canary": connect(canary_port), "postgres": connect(5432)}


def test_a_udf_gets_the_sandboxs_answers_not_the_hosts(hosted: Hosted,
                                                       canaries: Canaries) -> None:
    token = secrets.token_hex(6)
    folder = Path("/var/tmp") / f"spate-udf-probe-{token}"
    folder.mkdir(mode=0o755)
    host_file, marker = folder / "host.txt", folder / "loaded-by"
    host_file.write_text("a file of the host's, readable by every user")
    host_file.chmod(0o644)
    earlier = canaries.canary.accepted
    assert _host_answers(host_file, canaries.canary.port) == {
        "file": "read", "shadow": "exists", "canary": "connected", "postgres": "connected"}
    before = canaries.canary.counted(earlier + 1)  # the host's own probe, counted
    assert before == earlier + 1

    source = PROBE.format(marker=str(marker), host_file=str(host_file),
                          canary_port=canaries.canary.port,
                          server_pid=hosted.serve.process.pid)
    out = f"out/udf-{token}.jsonl"
    tenant = hosted.b
    with hosted.http() as http:
        stored = http.post("/udfs", headers=tenant.auth("developer"),
                           json={"name": "probe", "source": source})
        assert stored.status_code in (200, 201), stored.text
        assert not marker.exists(), "the API ran the tenant's file"
        created = http.post("/pipelines", headers=tenant.auth("developer"),
                            json={"name": f"probe-{token}", "sql": PIPELINE.format(path=out)})
        assert created.status_code == 201, created.text
        try:
            written = hosted.storage_root(tenant) / out
            line = wait_for("the probe's answers", lambda: written.exists()
                            and written.read_text().strip(), timeout_s=300)
        finally:
            http.delete(f"/pipelines/probe-{token}?force=true",
                        headers=tenant.auth("developer"))
    answers = dict(part.split("=", 1) for part in json.loads(line)["answers"].split(";"))
    assert answers["file"] == "FileNotFoundError"  # absent from the sandbox
    assert answers["shadow"] == "FileNotFoundError"
    assert answers["canary"] != "connected" and answers["postgres"] != "connected", answers
    assert canaries.canary.counted(before + 1, timeout_s=0.5) == before, \
        "the UDF reached the refused port"
    assert answers["fork"] in ("ProcessLookupError", "another process"), answers
    assert not marker.exists(), "the UDF's module wrote on the host"
    for path in (marker, host_file):
        path.unlink(missing_ok=True)
    os.rmdir(folder)
