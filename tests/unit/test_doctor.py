"""osrag doctor's pure parts: engines from k-NN stats and from an install, which indices need a
native engine, the check lines and the exit code. The live checks: tests/integration/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

from osrag.admin.doctor import Check, diagnose, exit_code
from osrag.capabilities import engines_from_install, engines_from_stats, field_engine, index_engines
from osrag.settings import Settings


def test_a_native_engine_is_known_only_once_every_node_loaded_it() -> None:
    stats = {"nodes": {"a": {"faiss_initialized": True}, "b": {"faiss_initialized": False}}}
    assert engines_from_stats(stats) == {"lucene": "yes", "faiss": "unknown", "nmslib": "unknown"}
    stats["nodes"]["b"]["faiss_initialized"] = True
    assert engines_from_stats(stats)["faiss"] == "yes"
    assert engines_from_stats({})["faiss"] == "unknown"


def test_an_install_serves_native_engines_only_with_their_libraries(tmp_path: Path) -> None:
    knn = tmp_path / "plugins" / "opensearch-knn"
    knn.mkdir(parents=True)
    assert engines_from_install(tmp_path) == {"lucene": "yes", "faiss": "no", "nmslib": "no"}
    (knn / "lib").mkdir()
    (knn / "lib" / "libopensearchknn_faiss_avx2.so").write_bytes(b"")
    assert engines_from_install(tmp_path)["faiss"] == "yes"


def test_which_indices_need_which_engine() -> None:
    mappings = {
        "lucene-idx": {
            "mappings": {"properties": {"v": {"type": "knn_vector", "method": {"engine": "lucene"}}}}
        },
        "default-idx": {"mappings": {"properties": {"doc": {"properties": {"v": {"type": "knn_vector"}}}}}},
        "exact-idx": {
            "mappings": {"properties": {"v": {"type": "knn_vector", "method": {"engine": "faiss"}}}}
        },
        "text-idx": {"mappings": {"properties": {"t": {"type": "text"}}}},
    }
    knn = {"lucene-idx": True, "default-idx": True, "exact-idx": False, "text-idx": True}
    assert index_engines(mappings, knn, (3, 6, 0)) == {"lucene-idx": {"lucene"}, "default-idx": {"faiss"}}
    assert index_engines(mappings, knn, (2, 17, 0))["default-idx"] == {"nmslib"}
    assert field_engine({"type": "knn_vector", "model_id": "m"}, (2, 11, 0)) == "faiss"


def test_lines_and_exit_code() -> None:
    checks = [
        Check("a", "ok", "fine", "never shown"),
        Check("b", "warn", "hmm", "do x"),
        Check("c", "fail", "bad", "do y"),
    ]
    assert [c.line() for c in checks] == ["ok   a: fine", "warn b: hmm  -> do x", "FAIL c: bad  -> do y"]
    assert exit_code(checks) == 1 and exit_code(checks[:2]) == 0


def test_an_unreachable_cluster_is_one_failed_check() -> None:
    s = Settings(url="http://127.0.0.1:1", max_retries=0, timeout_s=2, _env_file=None)
    (check,) = diagnose(s)
    assert check.name == "reachable" and check.status == "fail" and "osrag dev up" in check.hint


def test_the_reranker_check_says_off_missing_or_broken(tmp_path: Path, monkeypatch) -> None:
    from osrag import model_defaults
    from osrag.admin.doctor import _reranker
    from osrag.reranker_loading import forget_reranker_models

    model_defaults.locally_available.cache_clear()
    forget_reranker_models()
    off = _reranker(Settings(rerank=False, _env_file=None))
    assert off.status == "ok" and "OSRAG_RERANK=false" in off.detail
    # The default cross-encoder, not in this machine's cache: a warning that names the fix.
    monkeypatch.setattr(model_defaults, "locally_available", lambda name: False)
    default = _reranker(Settings(_env_file=None))
    assert default.status == "warn" and "fused order" in default.detail
    assert "osrag[local-models]" in default.hint and "OSRAG_RERANK=false" in default.hint
    # One the user named that is not here: a failure.
    named = _reranker(Settings(reranker_model=str(tmp_path / "none"), _env_file=None))
    assert named.status == "fail"
    # Here but broken: loaded as a search would, and the loader's one line is the detail.
    monkeypatch.setattr(model_defaults, "locally_available", lambda name: True)
    (tmp_path / "junk").mkdir()
    broken = _reranker(Settings(reranker_model=str(tmp_path / "junk"), _env_file=None))
    assert broken.status == "fail" and broken.detail.startswith("cannot load reranker")
    forget_reranker_models()
