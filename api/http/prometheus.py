"""Prometheus text exposition of pipeline and job figures, built per scrape.

Each scrape builds a :class:`SpateCollector` over figures just read from the
database and renders it; nothing is kept in prometheus_client's global
registry, so one tenant's scrape can never show series of another's. The
platform's scrape adds a ``tenant`` label (the tenant's id) and platform totals.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from spate.api.job_metrics import live, parse_epoch_figures
from spate.api.repositories.metrics import PipelineFigures, UsageFigure
from spate.scheduler.store import JOB_STATES

#: The media type of a scrape's body.
CONTENT_TYPE = CONTENT_TYPE_LATEST


@dataclass(frozen=True)
class PlatformTotals:
    """Counts over every tenant, for the platform's scrape."""

    tenants: int
    job_counts: dict[tuple[str, str], int] = field(default_factory=dict)


class SpateCollector:
    """The metric families of a set of pipelines (and, for the platform, its totals)."""

    def __init__(self, pipelines: Sequence[PipelineFigures], now: datetime,
                 platform: PlatformTotals | None = None,
                 usage: Sequence[UsageFigure] = ()) -> None:
        self.pipelines = pipelines
        self.usage = usage
        self.now = now
        self.platform = platform
        self.labels = ["tenant", "pipeline"] if platform is not None else ["pipeline"]

    def collect(self) -> Iterator[Metric]:
        yield from self._pipeline_families()
        yield self._usage_family()
        if self.platform is not None:
            yield from self._platform_families(self.platform)

    def _key(self, figures: PipelineFigures) -> list[str]:
        if self.platform is not None:
            return [figures.tenant_id, figures.pipeline]
        return [figures.pipeline]

    def _pipeline_families(self) -> Iterator[Metric]:
        rows_in = CounterMetricFamily("spate_pipeline_rows_in", "rows read over every "
                                      "committed epoch of every run", labels=self.labels)
        rows_out = CounterMetricFamily("spate_pipeline_rows_out", "rows written over every "
                                       "committed epoch of every run", labels=self.labels)
        rate = self._gauge("spate_pipeline_rows_per_second", "rows per second in the latest "
                           "epoch", ["direction"])
        desired = self._gauge("spate_pipeline_desired_running",
                              "1 when the pipeline should run, 0 when it should be stopped")
        state = self._gauge("spate_job_state", "1 for the state the pipeline's latest run "
                            "is in, 0 for the others", ["state"])
        epoch = self._gauge("spate_pipeline_last_epoch", "the latest committed epoch")
        lag = self._gauge("spate_pipeline_watermark_lag_seconds", "now minus the watermark")
        backpressure = self._gauge("spate_pipeline_backpressure", "busy ratio of the latest "
                                   "epoch: its duration over the time since the previous began")
        state_bytes = self._gauge("spate_pipeline_state_bytes", "bytes of state the latest "
                                  "epoch wrote")
        for figures in self.pipelines:
            key = self._key(figures)
            rows_in.add_metric(key, figures.rows_in_total)
            rows_out.add_metric(key, figures.rows_out_total)
            desired.add_metric(key, 1 if figures.desired_state == "running" else 0)
            job = figures.job
            if job is None:
                continue
            for name in JOB_STATES:
                state.add_metric([*key, name], 1 if job.shown_state == name else 0)
            latest = parse_epoch_figures(job.metrics)
            _add(rate, [*key, "in"], live(job, latest.rows_in_per_s))
            _add(rate, [*key, "out"], live(job, latest.rows_out_per_s))
            _add(epoch, key, job.last_epoch if job.last_epoch is not None else latest.epoch)
            _add(lag, key, latest.watermark_lag_s(self.now))
            _add(backpressure, key, live(job, latest.busy_ratio))
            _add(state_bytes, key, latest.state_bytes)
        yield from (rows_in, rows_out, rate, desired, state, epoch, lag, backpressure,
                    state_bytes)

    def _usage_family(self) -> Metric:
        """Metered usage: per pipeline for a tenant's scrape (previews: ``pipeline=""``),
        per tenant for the platform's."""
        usage = CounterMetricFamily(
            "spate_usage", "metered usage so far, in each dimension's base unit "
            "(compute_unit_seconds, cpu_seconds, memory_gb_seconds, state_gb_seconds, "
            "preview_seconds, events_in, events_out, bytes_in, bytes_out)",
            labels=["tenant", "dimension"] if self.platform is not None
            else ["pipeline", "dimension"])
        totals: dict[tuple[str, str], float] = {}
        for figure in self.usage:
            key = (figure.tenant_id if self.platform is not None else figure.pipeline,
                   figure.dimension)
            totals[key] = totals.get(key, 0.0) + figure.quantity
        for (owner, dimension), quantity in sorted(totals.items()):
            usage.add_metric([owner, dimension], quantity)
        return usage

    def _platform_families(self, platform: PlatformTotals) -> Iterator[Metric]:
        tenants = GaugeMetricFamily("spate_tenants", "tenants on the platform")
        tenants.add_metric([], platform.tenants)
        pipelines = GaugeMetricFamily("spate_pipelines", "pipelines by desired state",
                                      labels=["desired_state"])
        for desired_state in ("running", "stopped"):
            count = sum(1 for p in self.pipelines if p.desired_state == desired_state)
            pipelines.add_metric([desired_state], count)
        jobs = GaugeMetricFamily("spate_jobs", "jobs by kind and state",
                                 labels=["kind", "state"])
        for (kind, state), count in sorted(platform.job_counts.items()):
            jobs.add_metric([kind, state], count)
        yield from (tenants, pipelines, jobs)

    def _gauge(self, name: str, documentation: str,
               extra_labels: Sequence[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, documentation, labels=[*self.labels, *extra_labels])


def render(collector: SpateCollector) -> bytes:
    """The collector's families in the text exposition format."""
    return generate_latest(collector)


def _add(family: GaugeMetricFamily, labels: list[str], value: float | None) -> None:
    if value is not None:
        family.add_metric(labels, value)
