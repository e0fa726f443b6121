"""The web console's files served beside the API: its pages, assets and headers."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import pytest
from fastapi import FastAPI

from spate.api.http.routes.console import DIST_DIR, mount_console
from tests.api.support import TestClient, error_of


@pytest.mark.parametrize("path", ["/", "/sign-in", "/pipelines", "/pipelines/new",
                                  "/pipelines/some-name", "/connections", "/usage",
                                  "/invoices", "/quotas", "/keys"])
def test_each_console_page_is_the_app_shell(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<main id="main"' in response.text
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-cache"


def test_assets_are_served_and_api_paths_keep_json_errors(client: TestClient) -> None:
    shell = client.get("/").text
    for asset in re.findall(r'(?:src|href)="(/assets/[^"]+)"', shell):
        assert client.get(asset).status_code == 200, asset
    assert client.get("/assets/no-such-file.js").status_code == 404
    unknown = client.get("/api/v1/no-such-route")
    assert unknown.status_code == 404 and error_of(unknown)["code"] == "not_found"
    assert "/" not in client.get("/api/v1/openapi.json").json()["paths"]


def test_the_committed_build_matches_its_index(client: TestClient) -> None:
    index = (DIST_DIR / "index.html").read_text()
    built = {p.name for p in (DIST_DIR / "assets").iterdir()}  # no leftovers of old builds
    referenced = set(re.findall(r"/assets/([^\"]+)", index))
    assert referenced and referenced == built, "rebuild: npm --prefix api/console run build"


#: What the console's build is made from (as in its vite.config.ts).
CONSOLE_SOURCES = ("src", "index.html", "package-lock.json", "tsconfig.json", "vite.config.ts")


def _source_digest(root: Path) -> str:
    paths = sorted(str(p.relative_to(root).as_posix())
                   for source in CONSOLE_SOURCES
                   for p in ([root / source] if (root / source).is_file()
                             else (root / source).rglob("*"))
                   if p.is_file())
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path}\0".encode())
        digest.update((root / path).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def test_the_committed_build_is_of_the_current_sources() -> None:
    built_from = (DIST_DIR / "source.sha256").read_text().strip()
    assert built_from == _source_digest(DIST_DIR.parent), (
        "api/console/dist is stale: npm --prefix api/console ci && "
        "npm --prefix api/console run build")


def test_an_unbuilt_console_is_skipped_with_a_warning(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    app = FastAPI()
    with caplog.at_level(logging.WARNING):
        assert mount_console(app, tmp_path) is False
    assert "npm --prefix api/console ci" in caplog.text
    assert TestClient(app).get("/").status_code == 404
