"""The web console: its built single-page app, served at ``/`` beside the API.

The console is a static bundle (``api/console/dist``, built from the
TypeScript under ``api/console/src`` and shipped in the Python package), so
serving it needs no Node. Its hashed assets are served as files; each of its
pages answers with ``index.html`` and the app's router takes over in the
browser. Only the console's own paths are routed here, so unknown ``/api/…``
paths keep their JSON 404s.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

DIST_DIR = Path(__file__).resolve().parents[2] / "console" / "dist"
#: The console's pages (its client-side routes); each is served index.html.
PAGES = ("/", "/sign-in", "/pipelines", "/pipelines/new", "/pipelines/{name}",
         "/connections", "/udfs", "/usage", "/invoices", "/quotas", "/keys")
# The bundle loads only from this origin; CodeMirror sets element styles, and the
# favicon is a data: URL.
_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": ("default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; connect-src 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

log = logging.getLogger(__name__)


def mount_console(app: FastAPI, dist_dir: Path = DIST_DIR) -> bool:
    """Serve the console from ``dist_dir`` on ``app``; False (and a warning) if it is not
    built."""
    index = dist_dir / "index.html"
    if not index.is_file():
        log.warning("web console not served: %s is missing; build it with 'npm --prefix "
                    "api/console ci && npm --prefix api/console run build'", index)
        return False
    app.mount("/assets", StaticFiles(directory=dist_dir / "assets"), name="console-assets")
    router = APIRouter(include_in_schema=False)

    def page() -> FileResponse:
        return FileResponse(index, media_type="text/html", headers=_HEADERS)

    for path in PAGES:
        router.add_api_route(path, page, methods=["GET"], name=f"console:{path}")
    app.include_router(router)
    return True
