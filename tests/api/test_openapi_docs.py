"""The interactive API docs work without internet: every asset they load is served by the app."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI

from tests.api.support import TestClient

#: The pages, and a name each one's main script must define (proof it is the real asset).
PAGES = {"/api/v1/docs": "SwaggerUIBundle", "/api/v1/redoc": "Redoc"}


class _AssetLinks(HTMLParser):
    """Collects the URLs a page loads: script sources and linked files."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href", "img": "src", "redoc": "spec-url"}.get(tag)
        self.urls.extend(value for name, value in attrs if name == wanted and value)


def _asset_urls(page: str) -> list[str]:
    parser = _AssetLinks()
    parser.feed(page)
    return parser.urls


@pytest.fixture
def docs_client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app("sqlite"), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.mark.parametrize("path", PAGES)
def test_the_docs_page_names_no_other_host(docs_client: TestClient, path: str) -> None:
    page = docs_client.get(path)
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text, page.text
    urls = _asset_urls(page.text)
    assert any(url.endswith(".js") for url in urls), urls
    for url in urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{path} loads {url} from elsewhere"


@pytest.mark.parametrize(("path", "symbol"), PAGES.items())
def test_every_asset_the_docs_page_names_is_served_here(docs_client: TestClient, path: str,
                                                        symbol: str) -> None:
    page = docs_client.get(path)
    scripts = []
    for url in _asset_urls(page.text):
        asset = docs_client.get(url)
        assert asset.status_code == 200, f"{url}: {asset.status_code}"
        assert asset.content, url
        if url.endswith(".js"):
            assert "javascript" in asset.headers["content-type"]
            scripts.append(asset.text)
        elif url.endswith(".css"):
            assert asset.headers["content-type"].startswith("text/css")
    assert any(symbol in script for script in scripts), f"no script of {path} defines {symbol}"


def test_the_docs_page_points_swagger_ui_at_the_openapi_document(docs_client: TestClient) -> None:
    page = docs_client.get("/api/v1/docs").text
    assert "'/api/v1/openapi.json'" in page
    assert '"validatorUrl": null' in page  # the document is never sent to an online validator
    assert docs_client.get("/api/v1/openapi.json").json()["info"]["title"] == "Spate control plane"
