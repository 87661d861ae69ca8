"""What a cluster_model test does when the node's DJL has no libtorch (a node not started by
``osrag dev up``): skip with the fix, or fail where CI requires local models to run
(``OSRAG_TEST_REQUIRE_CLUSTER_MODELS=1``), so a skipped stage never reads as a passed one."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import pytest

NO_LIBTORCH = "this node has no libtorch for DJL: restart it with `osrag dev up`, which places it"


def no_libtorch() -> NoReturn:
    if os.environ.get("OSRAG_TEST_REQUIRE_CLUSTER_MODELS"):
        pytest.fail(NO_LIBTORCH + " (required: OSRAG_TEST_REQUIRE_CLUSTER_MODELS is set)")
    pytest.skip(NO_LIBTORCH)


#: ml-commons' reasons when DJL found no libtorch on the node (and, once it failed, it does not retry
#: before a restart).
_NO_LIBTORCH_SIGNS = ("publish.djl.ai", "pytorch index file", "OrtNDManager")


def deploy_or_skip(ml: Any, model_id: str) -> Any:
    """``ml.deploy(model_id)``; a node without libtorch skips the test (or fails it in CI)."""
    from osrag.mlcommons.errors import MLCommonsError

    try:
        return ml.deploy(model_id)
    except MLCommonsError as exc:
        if any(s in str(exc) for s in _NO_LIBTORCH_SIGNS):
            no_libtorch()
        raise


def remove_model(ml: Any, model_id: str) -> None:
    """Undeploy and delete a test's model, each step on its own (a failed undeploy still deletes)."""
    from osrag.mlcommons.errors import MLCommonsError

    for step in (lambda: ml.undeploy(model_id), lambda: ml.delete(model_id)):
        try:
            step()
        except MLCommonsError:
            pass


def predict_count(client: Any, model_id: str) -> int:
    """Inference requests the model has served, summed over the nodes that answer (ml-commons' stats)."""
    got = client.transport.perform_request("GET", "/_plugins/_ml/stats")
    return sum(
        int(
            ((n.get("models") or {}).get(model_id) or {}).get("predict", {}).get("ml_action_request_count", 0)
        )
        for n in got["nodes"].values()
    )
