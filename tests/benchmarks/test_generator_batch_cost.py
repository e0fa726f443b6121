"""What the driver spends building a generator's batch each epoch: the DataFrame of the
rows between two offsets (``GeneratorConnector.rows``), before Spark runs anything.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_generator_batch_cost.py -s``

Every epoch of a pipeline reading ``impulse`` or ``nexmark`` builds one; the time is
calls into the JVM (one per function of an expression) and Spark's analysis of each
projection, all on the driver's epoch path.  200 epochs of 200 ms of input each,
after 30 to warm up, parallelism 2.  Written to ``results.json`` under
``generator_batch_ms``; nothing is asserted.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS
from tests.benchmarks.workloads import save_result
from tests.engine.connectors.support import make_table

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

WARM_EPOCHS = 30
EPOCHS = 200
EPOCH_MS = 200
START_MS = 1_700_000_000_000


def _batch_ms(spark: SparkSession, connector_name: str) -> float:
    connector = CONNECTORS[connector_name]
    table = make_table(connector_name, event_rate=100)
    offset: Any = connector.advance(table, 2, None, START_MS)  # type: ignore[attr-defined]
    spent = 0.0
    for epoch in range(WARM_EPOCHS + EPOCHS):
        end = connector.advance(table, 2, offset,  # type: ignore[attr-defined]
                                START_MS + EPOCH_MS * (epoch + 1))
        began = time.perf_counter()
        connector.rows(spark, table, 2, offset, end)  # type: ignore[attr-defined]
        if epoch >= WARM_EPOCHS:
            spent += time.perf_counter() - began
        offset = end
    return spent / EPOCHS * 1000


def test_generator_batch_cost(spark: SparkSession) -> None:
    figures = {name: round(_batch_ms(spark, name), 1) for name in ("impulse", "nexmark")}
    print(f"\nbuilding a generator's batch, ms per epoch: {figures}")
    save_result("generator_batch_ms", figures)
