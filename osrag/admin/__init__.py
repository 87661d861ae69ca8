"""The admin side: install, reindex, lifecycle, locks, status, doctor and roles of an alias.

``from osrag.admin import Admin`` keeps working for tools written against the module this package
replaced; loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name != "Admin":
        raise AttributeError(f"module 'osrag.admin' has no attribute {name!r}")
    return importlib.import_module("osrag.admin.installer").Admin
