"""``spate run``: plan a SQL file and run it on local Spark with embedded state."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import click

from spate.engine.connectors import ConnectorError
from spate.engine.connectors.builtin.sinks import StdoutSink
from spate.engine.connectors.formats.records import JSON, FormatSpec
from spate.engine.defaults import (
    DEFAULT_EPOCH_MAX_DELAY_MS,
    DEFAULT_FLUSH_INTERVAL_MS,
    DEFAULT_STATE_URL,
)
from spate.engine.explain import explain_plan
from spate.engine.planner import PREVIEW_SINK, PipelinePlan, PlanningError, plan_pipeline
from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.runtime.failures import locate_in_sql
from spate.engine.runtime.pacing import pacing_for
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.spark import build_spark
from spate.engine.udf import UdfDefinitionError, UdfRegistry, load_udfs
from spate.statestore import PipelineState, StateStoreError, open_store

log = logging.getLogger(__name__)

EXIT_PLANNING_ERROR = 2
EXIT_RUNTIME_ERROR = 1


@click.command("run")
@click.argument("sql_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--parallelism", "-p", default=1, show_default=True, type=click.IntRange(1, 128),
              help="Tasks per operator (key-group ranges) and source partitions.")
@click.option("--state", "state_url", default=DEFAULT_STATE_URL, show_default=True,
              help="State store URL.")
@click.option("--checkpoint", "checkpoint_dir", default=None, type=click.Path(path_type=Path),
              help="Spark checkpoint directory (default: .spate/checkpoints/<pipeline>).")
@click.option("--pipeline", "pipeline_id", default=None,
              help="Pipeline id in the state store (default: the file name).")
@click.option("--tenant", default="default", show_default=True)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--udf", "udf_file", default=None,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Python file of the pipeline's UDFs (see docs/udfs.md).")
@click.option("--update-flush-interval-ms", "flush_ms", default=DEFAULT_FLUSH_INTERVAL_MS,
              show_default=True, type=click.IntRange(min=0),
              help="pipeline.update-aggregate-flush-interval: how often updating (non-"
                   "windowed) aggregates emit their changes; 0: every epoch.")
@click.option("--epoch-max-delay-ms", "max_delay_ms", default=DEFAULT_EPOCH_MAX_DELAY_MS,
              show_default=True, type=click.IntRange(0, 3_600_000),
              help="Rate-adaptive epochs: after an epoch of few rows, wait for more, at "
                   "most this long; 0: epochs back to back (docs/running.md).")
@click.option("--explain", is_flag=True, help="Print the plan and exit without running.")
def run(sql_file: Path, parallelism: int, state_url: str, checkpoint_dir: Path | None,
        pipeline_id: str | None, tenant: str, master: str, udf_file: Path | None,
        flush_ms: int, max_delay_ms: int, explain: bool) -> None:
    """Run the pipeline in SQL_FILE until its input ends (or Ctrl-C / SIGTERM)."""
    plan_text = sql_file.read_text()
    try:
        udfs = _load_udfs(udf_file)
        plan = plan_pipeline(plan_text, udfs=udfs, check_inputs=not explain)
    except PlanningError as error:
        click.echo(f"{sql_file}:{error.line}:{error.column}: error: {error.message}", err=True)
        sys.exit(EXIT_PLANNING_ERROR)
    except UdfDefinitionError as error:
        _udf_error(error)
    if explain:
        click.echo(explain_plan(plan))
        return
    # py4j logs every Python error raised inside a Spark callback; Spate reports it once.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    pipeline_id = pipeline_id or sql_file.stem
    checkpoint_dir = checkpoint_dir or Path(".spate/checkpoints") / pipeline_id
    try:
        _run_plan(plan, state_url, checkpoint_dir, (tenant, pipeline_id), master,
                  RunOptions(parallelism=parallelism, update_flush_interval_ms=flush_ms,
                             pacing=pacing_for(max_delay_ms)))
    except UdfDefinitionError as error:  # a name Spark itself already uses
        _udf_error(error)
    except (PipelineFailedError, ConnectorError, StateStoreError) as error:
        where = locate_in_sql(plan_text, str(error)) if isinstance(
            error, PipelineFailedError) else None
        place = f"{sql_file}:{where[0]}:{where[1]}: " if where else ""
        click.echo(f"{place}error: pipeline failed: {error}", err=True)
        sys.exit(EXIT_RUNTIME_ERROR)


def _load_udfs(udf_file: Path | None) -> UdfRegistry | None:
    """The UDF file's signatures (it runs only in Spark's Python workers)."""
    return None if udf_file is None else load_udfs(udf_file.read_text(), str(udf_file))


def _udf_error(error: UdfDefinitionError) -> None:
    click.echo(f"{error.filename}:{error.line}:{error.column}: error: {error.message}",
               err=True)
    sys.exit(EXIT_PLANNING_ERROR)


def _run_plan(plan: PipelinePlan, state_url: str, checkpoint_dir: Path,
              scope: tuple[str, str], master: str, settings: RunOptions) -> None:
    if state_url.startswith("sqlite:///"):
        Path(state_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    store = open_store(state_url)
    try:
        state = store.pipeline(*scope)
        _restart_if_finished(state, checkpoint_dir)
        spark = build_spark(master)
        options = replace(settings, checkpoint_dir=str(checkpoint_dir),
                          on_epoch=_progress_printer(),
                          sink_overrides={PREVIEW_SINK: StdoutSink(FormatSpec(JSON))})
        runner = PipelineRunner(plan, spark, state, options)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: runner.request_stop())
        finished = runner.run()
    finally:
        store.close()
    counters = json.dumps(runner.counters, sort_keys=True)
    click.echo(f"{'finished' if finished else 'stopped'}: {counters}", err=True)


def _restart_if_finished(state: PipelineState, checkpoint_dir: Path) -> None:
    """A finished (bounded) pipeline has nothing to resume: run it again from the start."""
    last = state.last_committed_epoch()
    if last is None or not state.epoch_metadata().get("finished"):
        return
    click.echo(f"pipeline '{state.pipeline}' finished earlier; running it again from the "
               "start", err=True)
    state.drop()
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


def _progress_printer() -> Callable[[EpochReport], None]:
    interactive = sys.stderr.isatty()

    def show(report: EpochReport) -> None:
        rate_in = report.rows_in / report.duration_s if report.duration_s else 0.0
        rate_out = report.rows_out / report.duration_s if report.duration_s else 0.0
        watermark = "+inf" if report.finished else _timestamp(report.watermark_us)
        line = (f"epoch {report.epoch}: in {report.rows_in} ({rate_in:,.0f}/s) "
                f"out {report.rows_out} ({rate_out:,.0f}/s) late {report.rows_late} "
                f"dropped {report.rows_dropped} watermark {watermark}")
        if interactive:
            click.echo("\r\033[K" + line, err=True, nl=False)
            if report.finished:
                click.echo("", err=True)
        else:
            log.info(line)

    return show


def _timestamp(micros: int) -> str:
    try:
        return datetime.fromtimestamp(micros / 1e6, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return "none"
