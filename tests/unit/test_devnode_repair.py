"""A dev node that dies opening an index: the index named from its logs, its data moved aside.

The real crash (a faiss index on a node without the native library) is reproduced by
tests/integration/test_devnode_wedge.py on a node of its own; here the log reading and the move."""

from __future__ import annotations

from pathlib import Path

from osrag.devnode import process as proc

UUID = "Xk3mP0qRsT5uVw7yZa9bCd"


def node_dirs(tmp_path: Path) -> tuple[Path, Path]:
    logs, data = tmp_path / "logs", tmp_path / "data"
    (data / "nodes" / "0" / "indices" / UUID / "_state").mkdir(parents=True)
    (data / "nodes" / "0" / "indices" / UUID / "_state" / "state-3.st").write_bytes(b"\x00\x01vecs-faiss\x00")
    (data / "nodes" / "0" / "indices" / "OtherUuid000000000000a" / "_state").mkdir(parents=True)
    logs.mkdir()
    return logs, data


def test_the_index_a_node_died_opening_is_named_with_its_folder(tmp_path: Path) -> None:
    logs, data = node_dirs(tmp_path)
    (logs / "osrag-dev.log").write_text(
        "[2026-12-02T10:00:00,000][INFO ][o.o.c.r.a.AllocationService] [osrag-dev-node] started\n"
        f"[2026-12-02T10:00:01,000][WARN ][o.o.i.c.IndicesClusterStateService] [osrag-dev-node] [vecs-faiss][0] "
        "marking and sending shard failed due to [failed to create index]\n"
        "java.lang.UnsatisfiedLinkError: no opensearchknn_faiss in java.library.path\n"
        f"\tat ... [vecs-faiss/{UUID}]\n"
    )
    name, folder, line = proc.culprit_index(logs, data)  # type: ignore[misc]
    assert name == "vecs-faiss" and folder == data / "nodes" / "0" / "indices" / UUID
    assert "shard failed" in line or "UnsatisfiedLinkError" in line


def test_without_a_uuid_the_folder_is_found_by_the_name_in_its_state_file(tmp_path: Path) -> None:
    logs, data = node_dirs(tmp_path)
    (logs / "osrag-dev.log").write_text(
        "[..][ERROR][o.o.b.OpenSearchUncaughtExceptionHandler] fatal error in thread [opensearch[osrag-dev-node]"
        "[generic][T#3]], exiting while opening [vecs-faiss][0]\n"
    )
    name, folder, _ = proc.culprit_index(logs, data)  # type: ignore[misc]
    assert name == "vecs-faiss" and folder is not None and folder.name == UUID


def test_a_clean_log_names_nothing_and_the_move_keeps_the_data(tmp_path: Path) -> None:
    logs, data = node_dirs(tmp_path)
    (logs / "osrag-dev.log").write_text("[..][INFO ][o.o.n.Node] [osrag-dev-node] started\n")
    assert proc.culprit_index(logs, data) is None
    folder = data / "nodes" / "0" / "indices" / UUID
    dest = proc.move_aside(folder, "vecs-faiss", tmp_path / "quarantine")
    assert not folder.exists() and (dest / "_state" / "state-3.st").read_bytes().endswith(b"vecs-faiss\x00")
    assert dest.name.endswith(f"-vecs-faiss-{UUID}")


def test_a_crash_of_an_earlier_run_is_not_named(tmp_path: Path) -> None:
    logs, data = node_dirs(tmp_path)
    start = "[2026-12-02T10:0{}:00,000][INFO ][o.o.n.Node               ] [osrag-dev-node] version[3.6.0], pid[1]\n"
    (logs / "osrag-dev.log").write_text(
        start.format(1)
        + f"[..][ERROR][o.o.i.e.Engine] [osrag-dev-node] [vecs-faiss][0] tragic\njava.lang.UnsatisfiedLinkError: x [vecs-faiss/{UUID}]\n"
        + start.format(2)
        + "[..][INFO ][o.o.n.Node] [osrag-dev-node] started\n"
    )
    assert proc.culprit_index(logs, data) is None


def test_a_native_library_failure_without_an_index_is_traced_through_the_index_state(tmp_path: Path) -> None:
    logs, data = tmp_path / "logs", tmp_path / "data"
    other = "Q0therUuid0000000000ab"
    for uuid, state in ((UUID, b"\x00vectors\x00method\x00engine\x00faiss\x00"), (other, b"\x00plain\x00")):
        (data / "nodes" / "0" / "indices" / uuid / "_state").mkdir(parents=True)
        (data / "nodes" / "0" / "indices" / uuid / "_state" / "state-1.st").write_bytes(state)
    logs.mkdir()
    (logs / "osrag-dev.log").write_text(
        "[..][INFO ][o.o.n.Node               ] [osrag-dev-node] version[3.6.0], pid[9]\n"
        f"[..][INFO ][o.o.p.PluginsService] [osrag-dev-node] PluginService:onIndexModule index:[plain/{other}]\n"
        f"[..][INFO ][o.o.p.PluginsService] [osrag-dev-node] PluginService:onIndexModule index:[vectors/{UUID}]\n"
        "[..][ERROR][o.o.k.j.KNNLibraryLoader ] [osrag-dev-node] Failed to load library: opensearchknn_faiss_avx2\n"
        "[..][ERROR][o.o.b.OpenSearchUncaughtExceptionHandler] [osrag-dev-node] fatal error in thread "
        "[opensearch[osrag-dev-node][generic][T#2]], exiting\n"
        "java.lang.UnsatisfiedLinkError: no opensearchknn_faiss_avx2 in java.library.path\n"
    )
    name, folder, line = proc.culprit_index(logs, data)  # type: ignore[misc]
    assert name == "vectors" and folder is not None and folder.name == UUID
    assert "opensearchknn_faiss" in line
