"""Which sources a run asks for its backlog (:mod:`spate.engine.runtime.backlog`): those
whose connector can tell; a run without one measures nothing (no offsets read per epoch)."""

from __future__ import annotations

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.backlog import BacklogGauge

SINK = """CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT * FROM src;"""


def test_a_run_of_sources_that_cannot_tell_measures_nothing() -> None:
    plan = plan_pipeline("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
                         + SINK)
    gauge = BacklogGauge(plan, 1)
    gauge.read_up_to({"src": {"counter": 5}})
    assert not gauge.measures and gauge.rows is None


def test_a_kafka_source_is_asked() -> None:
    plan = plan_pipeline("CREATE TABLE src (v TEXT) WITH (connector = 'kafka', type = 'source', "
                         "bootstrap_servers = '127.0.0.1:9', topic = 't', format = 'json');\n"
                         + SINK)
    assert BacklogGauge(plan, 1).measures
