"""One tenant floods validate with pathological SQL; how fast does the API answer another?

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_api_isolation.py -s``

A real ``spate serve`` (its default configuration: planning pool of 2
processes, 10 s budget per plan, one plan per tenant at a time) serves two
tenants. Tenant B's 20 threads each post a 60,000-term expression to
``/pipelines/validate`` over and over (a viewer key suffices); meanwhile
tenant A calls ``GET /me`` in a loop. The figures are A's latencies without
and with the flood, and what B's requests got. Written to ``results.json``
under ``api_isolation``.
"""

from __future__ import annotations

import secrets
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.api.serving import ServeProcess
from tests.benchmarks.workloads import save_result

pytestmark = pytest.mark.benchmark

FLOOD_THREADS = 20
FLOOD_TERMS = 60_000
SECONDS = 30.0
PLATFORM_KEY = "pk-" + secrets.token_urlsafe(32)


def latencies_of(http: httpx.Client, headers: dict[str, str], seconds: float) -> list[float]:
    """``GET /me`` latencies (s), one request after another for ``seconds``."""
    found: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        response = http.get("/me", headers=headers)
        found.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return found


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"requests": len(ordered), "p50_ms": round(1000 * statistics.median(ordered), 1),
            "p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1),
            "max_ms": round(1000 * ordered[-1], 1)}


def test_validate_flood_against_other_tenants_latency(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, {"SPATE_DATA_DIR": str(tmp_path / "data"),
                                    "SPATE_PLATFORM_ADMIN_KEY": PLATFORM_KEY,
                                    "SPATE_RATE_LIMIT_PER_MINUTE": "0"})
    try:
        with httpx.Client(base_url=serve.url + "/api/v1", timeout=120) as http:
            a = {"Authorization": f"Bearer {serve.admin_key}"}
            created = http.post("/tenants", json={"name": "flooder"},
                                headers={"Authorization": f"Bearer {PLATFORM_KEY}"})
            b = {"Authorization": f"Bearer {created.json()['admin_key']['key']}"}
            quiet = latencies_of(http, a, 10.0)

            added = "+".join(["c"] * FLOOD_TERMS)  # 120 KB: within the API's 200 KB limit
            sql = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
                   f"SELECT {added} AS total FROM (SELECT counter AS c FROM src);\n")
            stop = threading.Event()
            statuses: Counter[int] = Counter()

            def flood() -> None:
                with httpx.Client(base_url=serve.url + "/api/v1", timeout=120) as own:
                    while not stop.is_set():
                        statuses[own.post("/pipelines/validate", json={"sql": sql},
                                          headers=b).status_code] += 1

            threads = [threading.Thread(target=flood) for _ in range(FLOOD_THREADS)]
            for thread in threads:
                thread.start()
            time.sleep(2.0)  # let the flood fill the pool
            flooded = latencies_of(http, a, SECONDS)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
    finally:
        serve.stop()
    result = {"quiet": summary(quiet), "flooded": summary(flooded),
              "flood_statuses": dict(sorted(statuses.items())),
              "flood_threads": FLOOD_THREADS, "terms": FLOOD_TERMS, "seconds": SECONDS}
    print(result)
    save_result("api_isolation", result)
    assert 500 not in statuses
