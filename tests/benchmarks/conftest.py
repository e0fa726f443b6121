"""Benchmarks run only when asked: ``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks``.

They take minutes and measure, rather than check, so the default test run
skips them.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    if os.environ.get("SPATE_BENCHMARK") == "1":
        return
    skip = pytest.mark.skip(reason="benchmark: set SPATE_BENCHMARK=1 to run")
    for item in items:
        if "benchmark" in item.keywords:
            item.add_marker(skip)
