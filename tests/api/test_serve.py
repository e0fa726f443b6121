"""``spate serve`` on the embedded defaults: SQLite, in-process worker, no services."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.serving import ServeProcess


def test_serve_prints_a_working_key_and_a_restart_revokes_it(tmp_path: Path) -> None:
    first = ServeProcess(tmp_path, {})
    try:
        listed = first.http.get("/pipelines")
        assert listed.status_code == 200, listed.text
        assert listed.json()["items"] == []
        docs = httpx.get(f"{first.url}/api/v1/docs", timeout=30)
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        old_key = first.admin_key
    finally:
        assert first.stop() == 0, first.log()
    assert (tmp_path / ".spate" / "spate.db").exists()  # the embedded default's database

    second = ServeProcess(tmp_path, {})
    try:
        assert second.admin_key != old_key
        assert second.http.get("/pipelines").status_code == 200
        refused = second.http.get("/pipelines", headers={"Authorization": f"Bearer {old_key}"})
        assert refused.status_code == 401
    finally:
        assert second.stop() == 0, second.log()
    assert old_key not in second.log() and second.admin_key not in second.log()
