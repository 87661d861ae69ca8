"""OSRAG_HOSTS: the other nodes of a cluster the client may fail over to."""

from __future__ import annotations

import pytest

from osrag.connection import client_options
from osrag.errors import InvalidSetting
from osrag.settings import load_settings


def test_hosts_join_the_url_in_the_client_options() -> None:
    s = load_settings(
        url="http://u:pw@127.0.0.1:9220",
        hosts="http://127.0.0.1:9221, http://127.0.0.1:9222/",
        _env_file=None,
    )
    assert s.host_urls == ["http://127.0.0.1:9220", "http://127.0.0.1:9221", "http://127.0.0.1:9222"]
    opts = client_options(s)
    assert opts["hosts"] == s.host_urls and opts["http_auth"] == ("u", "pw")


def test_no_hosts_is_the_url_alone() -> None:
    assert load_settings(url="http://127.0.0.1:9200", _env_file=None).host_urls == ["http://127.0.0.1:9200"]


@pytest.mark.parametrize(
    ("hosts", "needle"),
    [
        ("https://127.0.0.1:9221", "scheme of OSRAG_URL"),
        ("ftp://127.0.0.1", "is not http"),
        ("http://127.0.0.1:99999", "invalid host or port"),
        ("http://admin:s3cret@127.0.0.1:9221", "no credentials"),
    ],
)
def test_bad_hosts_are_one_line_without_the_password(hosts: str, needle: str) -> None:
    with pytest.raises(InvalidSetting, match=needle) as err:
        load_settings(url="http://127.0.0.1:9220", hosts=hosts, _env_file=None)
    assert "s3cret" not in str(err.value) and "\n" not in str(err.value)


def test_gzip_is_off_unless_the_settings_turn_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert client_options(load_settings(_env_file=None))["http_compress"] is False
    monkeypatch.setenv("OSRAG_HTTP_COMPRESS", "true")
    assert client_options(load_settings(_env_file=None))["http_compress"] is True
    monkeypatch.setenv("OSRAG_HTTP_COMPRESS", "maybe")
    with pytest.raises(InvalidSetting, match="OSRAG_HTTP_COMPRESS"):
        load_settings(_env_file=None)
