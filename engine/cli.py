"""``spate run``: plan a SQL file and run it on local Spark with embedded state."""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path

import click

from engine.planner import PlanningError, plan_pipeline
from engine.runtime.errors import PipelineFailedError
from engine.runtime.runner import EpochReport, PipelineRunner, RunOptions
from engine.spark import build_spark
from statestore import StateCache, open_store

log = logging.getLogger(__name__)

EXIT_PLANNING_ERROR = 2
EXIT_RUNTIME_ERROR = 1


@click.command("run")
@click.argument("sql_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--parallelism", "-p", default=1, show_default=True, type=click.IntRange(1, 128),
              help="Tasks per operator (key-group ranges) and source partitions.")
@click.option("--state", "state_url", default=None,
              help="State store URL (default: sqlite:///.spate/state.db).")
@click.option("--checkpoint", "checkpoint_dir", default=None, type=click.Path(path_type=Path),
              help="Spark checkpoint directory (default: .spate/checkpoints/<pipeline>).")
@click.option("--pipeline", "pipeline_id", default=None,
              help="Pipeline id in the state store (default: the file name).")
@click.option("--tenant", default="default", show_default=True)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--explain", is_flag=True, help="Print the plan and exit without running.")
def run(sql_file: Path, parallelism: int, state_url: str | None, checkpoint_dir: Path | None,
        pipeline_id: str | None, tenant: str, master: str, explain: bool) -> None:
    """Run the pipeline in SQL_FILE until its input ends (or Ctrl-C / SIGTERM)."""
    try:
        plan = plan_pipeline(sql_file.read_text())
    except PlanningError as error:
        click.echo(f"{sql_file}:{error.line}:{error.column}: error: {error.message}", err=True)
        sys.exit(EXIT_PLANNING_ERROR)
    if explain:
        click.echo(plan.explain())
        return
    pipeline_id = pipeline_id or sql_file.stem
    state_url = state_url or "sqlite:///.spate/state.db"
    checkpoint_dir = checkpoint_dir or Path(".spate/checkpoints") / pipeline_id
    _run_plan(plan, state_url, checkpoint_dir, pipeline_id, tenant, master, parallelism)


def _run_plan(plan: object, state_url: str, checkpoint_dir: Path, pipeline_id: str,
              tenant: str, master: str, parallelism: int) -> None:
    if state_url.startswith("sqlite:///"):
        Path(state_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    store = open_store(state_url)
    spark = build_spark(master)
    options = RunOptions(parallelism=parallelism, checkpoint_dir=str(checkpoint_dir),
                         on_epoch=_progress_printer())
    runner = PipelineRunner(plan, spark, store.pipeline(tenant, pipeline_id),  # type: ignore[arg-type]
                            StateCache(), options)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: runner.request_stop())
    try:
        finished = runner.run()
    except PipelineFailedError as error:
        click.echo(f"error: pipeline failed: {error}", err=True)
        sys.exit(EXIT_RUNTIME_ERROR)
    finally:
        store.close()
    counters = json.dumps(runner.counters, sort_keys=True)
    click.echo(f"{'finished' if finished else 'stopped'}: {counters}", err=True)


def _progress_printer():  # type: ignore[no-untyped-def]
    interactive = sys.stderr.isatty()

    def show(report: EpochReport) -> None:
        rate_in = report.rows_in / report.duration_s if report.duration_s else 0.0
        rate_out = report.rows_out / report.duration_s if report.duration_s else 0.0
        watermark = "+inf" if report.finished else str(report.watermark_us)
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
