"""What a cluster_model test does when the node's DJL has no libtorch (a node not started by
``osrag dev up``): skip with the fix, or fail where CI requires local models to run
(``OSRAG_TEST_REQUIRE_CLUSTER_MODELS=1``), so a skipped stage never reads as a passed one."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

NO_LIBTORCH = "this node has no libtorch for DJL: restart it with `osrag dev up`, which places it"


def no_libtorch() -> NoReturn:
    if os.environ.get("OSRAG_TEST_REQUIRE_CLUSTER_MODELS"):
        pytest.fail(NO_LIBTORCH + " (required: OSRAG_TEST_REQUIRE_CLUSTER_MODELS is set)")
    pytest.skip(NO_LIBTORCH)
