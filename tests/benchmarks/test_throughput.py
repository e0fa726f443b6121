"""Throughput of Spate against the same queries written natively in Spark.

* HOP: events/s of ``count(*) ... GROUP BY key, HOP(1 s, width)`` over Nexmark
  bids for width/slide in :data:`RATIOS`; native Spark uses ``window(ts, width,
  slide)``, which assigns every row to width/slide windows, while Spate
  pre-aggregates panes and slides incrementally.
* Stateless: Spate's overhead over native Spark on a filter/projection.

Each figure is the best of ``REPEATS`` runs (the machines are shared and noisy),
Spate and native alternating, in one process and one SparkSession.  Results go
to ``docs/benchmarks/results.json`` and the plot to ``docs/benchmarks/hop.png``;
BENCHMARKS.md quotes them.  These tests check that every run consumed all its
input; they assert nothing about speed.
"""

from __future__ import annotations

import matplotlib
import pytest
from pyspark.sql import SparkSession

from tests.benchmarks.workloads import (
    RESULTS_DIR,
    Stream,
    best_run,
    hop_sql,
    run_native,
    run_spate,
    save_result,
    stateless_sql,
)

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after choosing the file backend)

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

RATIOS = (1, 10, 60, 120, 720)
REPEATS = 2
#: 200 events per second of event time: 600k events span 3,000 one-second slides.
HOP_STREAM = Stream(events=600_000, event_rate=200, batch=150_000)
#: Spate's overhead is mostly fixed per epoch, so it is measured at two epoch sizes.
STATELESS_STREAMS = (Stream(events=2_000_000, event_rate=200, batch=250_000),
                     Stream(events=4_000_000, event_rate=200, batch=1_000_000))
WARMUP_STREAM = Stream(events=100_000, event_rate=200, batch=50_000)


@pytest.fixture(scope="module")
def warm_spark(spark: SparkSession) -> SparkSession:
    """JIT, Python workers and the callback server warmed on both paths."""
    events = WARMUP_STREAM.events
    run_native(spark, WARMUP_STREAM, "stateless")
    run_spate(spark, stateless_sql(WARMUP_STREAM), events)
    run_native(spark, WARMUP_STREAM, "hop", 1, 10)
    run_spate(spark, hop_sql(WARMUP_STREAM, 1, 10), events)
    return spark


def test_hop_throughput_against_native_spark(warm_spark: SparkSession) -> None:
    stream = HOP_STREAM
    rows = []
    for ratio in RATIOS:
        native_runs, spate_runs = [], []
        # One native run at 720: it takes minutes.
        for _ in range(1 if ratio >= 720 else REPEATS):
            native_runs.append(run_native(warm_spark, stream, "hop", 1, ratio))
            spate_runs.append(run_spate(warm_spark, hop_sql(stream, 1, ratio), stream.events))
        native, spate = best_run(native_runs, stream.events), best_run(spate_runs, stream.events)
        rows.append({"width_over_slide": ratio, "native_events_per_s": native.events_per_s,
                     "spate_events_per_s": spate.events_per_s,
                     "native_s": native.seconds, "spate_s": spate.seconds,
                     "speedup": native.seconds / spate.seconds})
        print(f"HOP width/slide {ratio:>4}: native {native.events_per_s:>10,.0f} ev/s, "
              f"Spate {spate.events_per_s:>10,.0f} ev/s, x{rows[-1]['speedup']:.1f}")
    flat = rows[-1]["spate_events_per_s"] / rows[0]["spate_events_per_s"]
    print(f"Spate at width/slide {RATIOS[-1]} runs at {flat:.2f} of its speed at {RATIOS[0]}")
    save_result("hop", {"events": stream.events, "event_rate": stream.event_rate,
                        "batch": stream.batch, "runs": rows, "spate_last_over_first": flat})
    _plot(rows)


@pytest.mark.parametrize("stream", STATELESS_STREAMS, ids=lambda s: f"batch{s.batch}")
def test_stateless_overhead_against_native_spark(warm_spark: SparkSession,
                                                 stream: Stream) -> None:
    native_runs, spate_runs = [], []
    for _ in range(REPEATS + 1):
        native_runs.append(run_native(warm_spark, stream, "stateless"))
        spate_runs.append(run_spate(warm_spark, stateless_sql(stream), stream.events))
    native, spate = best_run(native_runs, stream.events), best_run(spate_runs, stream.events)
    overhead = spate.seconds / native.seconds - 1
    print(f"stateless, {stream.batch:,} events per epoch: native "
          f"{native.events_per_s:,.0f} ev/s, Spate {spate.events_per_s:,.0f} ev/s, "
          f"overhead {overhead:+.1%}")
    save_result(f"stateless_batch{stream.batch}", {
        "events": stream.events, "batch": stream.batch,
        "native_events_per_s": native.events_per_s, "spate_events_per_s": spate.events_per_s,
        "native_runs_s": [t.seconds for t in native_runs],
        "spate_runs_s": [t.seconds for t in spate_runs], "overhead": overhead})


def _plot(rows: list[dict[str, float]]) -> None:
    ratios = [r["width_over_slide"] for r in rows]
    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot(ratios, [r["spate_events_per_s"] for r in rows], "o-", label="Spate")
    axes.plot(ratios, [r["native_events_per_s"] for r in rows], "s--",
              label="native Spark window()")
    for r in rows:
        axes.annotate(f"x{r['speedup']:.1f}", (r["width_over_slide"], r["spate_events_per_s"]),
                      textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(ratios, [str(r) for r in ratios])
    axes.set_xlabel("HOP width / slide")
    axes.set_ylabel("events per second")
    axes.set_title("count(*) GROUP BY key, HOP(1 s, width) over Nexmark bids, 2 cores")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(RESULTS_DIR / "hop.png", dpi=110)
    plt.close(figure)
