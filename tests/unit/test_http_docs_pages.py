"""/docs and /redoc load their scripts and styles from this process, never from a CDN."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from osrag.service.auth import Auth
from osrag.service.http import create_app
from osrag.settings import Settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = create_app(Settings(_env_file=None), Auth(public_only=True), warm=False)
    return TestClient(app)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_pages_name_only_assets_this_server_serves(client: TestClient, page: str) -> None:
    pytest.importorskip("fastapi_offline")
    html = client.get(page)
    assert html.status_code == 200
    refs = re.findall(r'(?:src|href)="([^"]+)"', html.text)
    assert refs and all(r.startswith("/") for r in refs), refs  # nothing from another host
    assert "//" not in " ".join(refs)
    for ref in refs:
        got = client.get(ref)
        assert got.status_code == 200 and len(got.content) > 1000, ref
    assert "fonts.googleapis" not in html.text


def test_the_schema_is_still_served_and_the_pages_are_not_in_it(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "/v1/search" in schema["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in schema["paths"])
