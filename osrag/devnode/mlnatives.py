"""The native PyTorch library ml-commons needs to run a local ONNX model, placed before a dev node starts.

ml-commons runs ONNX models through DJL's ONNX Runtime engine, whose NDManager borrows PyTorch for
the array work around the model (pooling, normalising). The plugin bundles ONNX Runtime and the
tokenizers natives but not libtorch: DJL downloads it from publish.djl.ai on the first deploy, so
offline every local model fails to deploy with ``UnknownHostException: publish.djl.ai`` (and the
failed class initialisation lasts until the node restarts).

Maven Central carries the same libtorch build (``ai.djl.pytorch:pytorch-native-cpu``) and DJL's JNI
(``ai.djl.pytorch:pytorch-jni``); this module fetches them with the launcher's mvn and lays them out
where DJL looks first (``<data>/ml_cache/pytorch/<pytorch>-cpu-precxx11-<platform>/``; ml-commons
forces the precxx11 flavour name and points DJL's cache at ``<data>/ml_cache``). Maven Central has
no JNI built for every DJL release (none for 0.31.x); then the nearest newer one of the same
PyTorch line is used, which loads and runs the pooling ops ml-commons calls.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from osrag.devnode.plan import Artifact

_DJL_ENGINE = re.compile(r"^pytorch-engine-(\d+\.\d+\.\d+)\.jar$")
#: DJL releases whose JNI Maven Central lacks -> the JNI release used instead (same PyTorch line).
JNI_SUBSTITUTES = {"0.31.0": "0.32.0", "0.31.1": "0.32.0"}
#: libtorch each DJL release is built against (pytorch-engine.properties says so inside the jar).
CLASSIFIER = "linux-x86_64"


@dataclass(frozen=True)
class TorchNatives:
    djl_version: str
    pytorch_version: str

    @property
    def native(self) -> Artifact:
        return Artifact(
            "ai.djl.pytorch",
            "pytorch-native-cpu",
            self.pytorch_version,
            packaging="jar",
            classifier=CLASSIFIER,
        )

    @property
    def jni(self) -> Artifact:
        djl = JNI_SUBSTITUTES.get(self.djl_version, self.djl_version)
        return Artifact("ai.djl.pytorch", "pytorch-jni", f"{self.pytorch_version}-{djl}", packaging="jar")

    def cache_dir(self, data_dir: Path) -> Path:
        return data_dir / "ml_cache" / "pytorch" / f"{self.pytorch_version}-cpu-precxx11-{CLASSIFIER}"

    def placed(self, data_dir: Path) -> bool:
        d = self.cache_dir(data_dir)
        return (d / "libtorch.so").is_file() and (d / "libdjl_torch.so").is_file()


def wanted(install_dir: Path) -> TorchNatives | None:
    """What the installed ml-commons plugin's DJL needs, or None (no ml-commons, or not DJL's PyTorch)."""
    plugin = install_dir / "plugins" / "opensearch-ml"
    if not plugin.is_dir():
        return None
    for jar in plugin.glob("pytorch-engine-*.jar"):
        m = _DJL_ENGINE.match(jar.name)
        if not m:
            continue
        with zipfile.ZipFile(jar) as zf:
            try:
                props = zf.read("pytorch-engine.properties").decode()
            except KeyError:
                return None
        pt = re.search(r"pytorch_version=(\S+)", props)
        if pt:
            return TorchNatives(m.group(1), pt.group(1))
    return None


def lay_out(natives: TorchNatives, native_jar: Path, jni_jar: Path, data_dir: Path) -> Path:
    """Unpack libtorch and the JNI into the node's DJL cache; returns the directory."""
    target = natives.cache_dir(data_dir)
    target.mkdir(parents=True, exist_ok=True)
    prefix = f"pytorch/cpu/{CLASSIFIER}/"
    with zipfile.ZipFile(native_jar) as zf:
        for name in zf.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                with zf.open(name) as src, (target / Path(name).name).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    with zipfile.ZipFile(jni_jar) as zf:
        data = zf.read(f"jnilib/{CLASSIFIER}/cpu/libdjl_torch.so")
    # DJL looks for "<djl>-libdjl_torch.so", then "libdjl_torch.so", in the libtorch directory.
    for name in ("libdjl_torch.so", f"{natives.djl_version}-libdjl_torch.so"):
        (target / name).write_bytes(data)
    return target
