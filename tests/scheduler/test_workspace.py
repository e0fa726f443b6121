"""Which connection tables a job's spec carries: only those its SQL names."""

from __future__ import annotations

from spate.scheduler.workspace import named_tables

TABLES = [{"name": "orders", "connector": "single_file"},
          {"name": "payments", "connector": "single_file"},
          {"name": "Audit", "connector": "blackhole"}]


def test_only_tables_the_sql_names_are_kept() -> None:
    sql = "INSERT INTO audit SELECT * FROM orders WHERE note <> 'payments_x'"
    assert [t["name"] for t in named_tables(sql, TABLES)] == ["orders", "Audit"]


def test_a_name_inside_a_longer_word_does_not_count() -> None:
    assert named_tables("SELECT orders_total FROM x", TABLES) == []


def test_a_job_spec_carries_the_deployment_flush_interval(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spate.api.settings import Settings
    from spate.api.worker import scheduler_config
    from spate.engine.job.spec import JobSpec
    from spate.scheduler.backends.local import LocalBackend
    from spate.scheduler.workspace import Workspace
    from tests.scheduler.factories import job

    settings = Settings(data_dir=tmp_path, update_flush_interval_ms=250)
    config = scheduler_config(settings)
    spec = Workspace(config, LocalBackend(config)).spec(job())
    assert spec.update_flush_interval_ms == 250
    assert JobSpec.from_json(spec.to_json()).update_flush_interval_ms == 250
