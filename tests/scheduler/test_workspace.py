"""Which connection tables and UDFs a job's spec carries: only those its SQL names."""

from __future__ import annotations

from pathlib import Path

from spate.engine.job.spec import JobSpec
from spate.scheduler.backends.local import LocalBackend
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.workspace import Workspace, named_tables
from tests.scheduler.factories import job

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


UDFS = [{"name": "ratio", "filename": "ratio.py", "source": "# ratio\n"},
        {"name": "spread", "filename": "spread.py", "source": "# spread\n"}]


def test_a_job_spec_carries_the_files_of_the_udfs_its_sql_names(tmp_path: Path) -> None:
    config = SchedulerConfig(data_dir=tmp_path / "data",
                             state_url=f"sqlite:///{tmp_path / 'state.db'}").resolved()
    workspace = Workspace(config, LocalBackend(config))
    sql = "INSERT INTO out SELECT RATIO(a, b) AS spread_x FROM t"
    spec = workspace.spec(job(sql=sql), udfs=UDFS)
    assert spec.udf_files == [{"filename": "ratio.py", "source": "# ratio\n"}]
    assert JobSpec.from_json(spec.to_json()).udf_files == spec.udf_files
    assert workspace.spec(job(sql="SELECT 1"), udfs=UDFS).udf_files == []
