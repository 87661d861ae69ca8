from __future__ import annotations

from pathlib import Path

import pytest

from osrag.devnode import REQUIRED_PLUGINS, DevNode, _java_major, _last_error_line, artifacts
from osrag.errors import LauncherError
from osrag.settings import Settings


def test_artifacts_match_the_core_version_exactly() -> None:
    arts = artifacts("3.6.0")
    assert arts[0].coordinate == "org.opensearch.distribution.integ-test-zip:opensearch:3.6.0:zip"
    assert all(a.version == "3.6.0.0" for a in arts[1:])
    names = [a.plugin_name for a in arts[1:]]
    for needed in REQUIRED_PLUGINS:
        assert needed in names
    # A plugin is installed after the plugins it extends.
    assert names.index("opensearch-knn") < names.index("opensearch-neural-search")
    assert names.index("opensearch-job-scheduler") < names.index("opensearch-ml")
    p = arts[4].path_in(Path("/m2"))
    assert p == Path("/m2/org/opensearch/plugin/neural-search/3.6.0.0/neural-search-3.6.0.0.zip")


def test_java_major_reads_the_release_file(tmp_path: Path) -> None:
    (tmp_path / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="25.0.1"\n')
    assert _java_major(tmp_path) == 25
    assert _java_major(tmp_path / "missing") == 0


def test_too_old_explicit_jdk_is_refused(tmp_path: Path) -> None:
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.15"\n')
    node = DevNode(Settings(dev_java_home=tmp_path, dev_home=tmp_path / "h", _env_file=None))
    with pytest.raises(LauncherError, match="JDK >= 21"):
        node.java_home()


def test_status_of_a_port_nobody_listens_on(tmp_path: Path) -> None:
    node = DevNode(Settings(dev_home=tmp_path, dev_port=9, _env_file=None))
    st = node.status()
    assert st.running is False and st.pid is None
    assert node.down() is False  # nothing was started: nothing is killed


def test_last_error_line_strips_colour_and_prefers_errors() -> None:
    text = "info line\n\x1b[1;31mERROR\x1b[m could not find artifact\ntrailing noise\n"
    assert _last_error_line(text) == "ERROR could not find artifact"
