"""How soon a tenant sees rows: a preview's first row, and a started pipeline's first
output, with the tenant's application cold (not running) and warm (running).

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_serverless.py -s``

A real ``spate serve`` on its defaults (tenants' warm applications on).  Cold:
the tenant has no application, so the request pays for starting one (a JVM and
Spark); warm: a pipeline of the tenant runs, so its application is up.  Times
are from the request to the first ``rows`` event of the preview's stream, and
from ``POST /pipelines`` to the first line in the pipeline's output file.
The cold preview's time is also split at the application's log lines
(:data:`MILESTONES`).  Cold after writing: the tenant's application is not running,
its SQL is validated (as the console does while it is written: the application
starts on that sign), and the preview comes :data:`WRITING_S` later. Written to
``results.json`` under ``serverless``.
"""

from __future__ import annotations

import datetime
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.serving import ServeProcess, sse_events
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.e2e, pytest.mark.timeout(3600)]

PREVIEW_SQL = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '100');
SELECT counter, counter * 2 AS twice FROM ticks;
"""
WARM_RUNS = 5
#: Time between validating SQL and previewing it (a user reading the diagnostics).
WRITING_S = 10.0


def pipeline_sql(name: str) -> str:
    return f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '100');
CREATE TABLE out WITH (connector = 'single_file', path = '{name}.jsonl', format = 'json',
    type = 'sink');
INSERT INTO out SELECT counter FROM ticks;
"""


def first_preview_row_s(http: httpx.Client, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    with http.stream("POST", "/pipelines/preview", headers=headers,
                     json={"sql": PREVIEW_SQL, "limit": 1, "timeout_s": 300}) as response:
        assert response.status_code == 200, response.read()
        for name, data in sse_events(response):
            assert name != "error", data
            if name == "rows":
                return time.perf_counter() - started
    raise AssertionError("the preview ended without a row")


def first_output_s(http: httpx.Client, headers: dict[str, str], storage: Path,
                   name: str) -> float:
    started = time.perf_counter()
    response = http.post("/pipelines", headers=headers,
                         json={"name": name, "sql": pipeline_sql(name)})
    assert response.status_code == 201, response.text
    output = storage / f"{name}.jsonl"
    while time.perf_counter() - started < 300:
        if output.exists() and output.stat().st_size > 0:
            return time.perf_counter() - started
        time.sleep(0.05)
    raise AssertionError(f"pipeline {name} wrote nothing in 300 s")


#: Where a cold start's time goes: the application's log lines that end each step.
MILESTONES = {"application process up": "sandbox, Python and imports",
              "spark session ready": "JVM and SparkContext",
              "job started": "job picked up"}


def cold_breakdown(log: Path, requested: float) -> dict[str, float]:
    """Seconds from the request (wall clock) to each of :data:`MILESTONES` in the
    application's ``host.log`` (its first start: the log's first occurrences)."""
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        for message, step in MILESTONES.items():
            if step not in found and message in line:
                stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                found[step] = round(stamp.timestamp() - requested, 2)
    return found


def _summary(values: list[float]) -> dict[str, Any]:
    return {"runs_s": [round(v, 2) for v in values],
            "median_s": round(statistics.median(values), 2), "max_s": round(max(values), 2)}


def test_time_to_first_rows_cold_and_warm(tmp_path: Path) -> None:
    data = tmp_path / "data"
    serve = ServeProcess(tmp_path, {"SPATE_DATA_DIR": str(data),
                                    "SPATE_RATE_LIMIT_PER_MINUTE": "0"})
    try:
        with httpx.Client(base_url=serve.url + "/api/v1", timeout=300) as http:
            headers = {"Authorization": f"Bearer {serve.admin_key}"}
            tenant = http.get("/me", headers=headers).json()["tenant_id"]
            storage = data / "tenants" / tenant
            requested = time.time()
            cold_preview = first_preview_row_s(http, headers)
            breakdown = cold_breakdown(data / "applications" / tenant / "run" / "host.log",
                                       requested)
            time.sleep(70)  # the application idles out (SPATE_APPLICATION_IDLE_EXIT_S = 60)
            cold_start = first_output_s(http, headers, storage, "first")
            warm_previews = [first_preview_row_s(http, headers) for _ in range(WARM_RUNS)]
            warm_starts = [first_output_s(http, headers, storage, f"next{i}")
                           for i in range(WARM_RUNS)]
            for i in range(WARM_RUNS):
                http.patch(f"/pipelines/next{i}", headers=headers, json={"stop": "immediate"})
            http.patch("/pipelines/first", headers=headers, json={"stop": "immediate"})
            time.sleep(70)  # idle out again
            validated = http.post("/pipelines/validate", headers=headers,
                                  json={"sql": PREVIEW_SQL})
            assert validated.status_code == 200 and validated.json()["valid"], validated.text
            time.sleep(WRITING_S)
            after_writing = first_preview_row_s(http, headers)
    finally:
        serve.stop()
    result = {"preview_first_row": {"cold_s": round(cold_preview, 2),
                                    "cold_steps_s": {**breakdown, "first row": round(
                                        cold_preview, 2)},
                                    "cold_after_writing_s": round(after_writing, 2),
                                    "writing_s": WRITING_S,
                                    "warm": _summary(warm_previews)},
              "pipeline_first_output": {"cold_s": round(cold_start, 2),
                                        "warm": _summary(warm_starts)}}
    print(result)
    save_result("serverless", result)
