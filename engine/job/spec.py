"""What a job runs: a pipeline's SQL and where its state, checkpoint and channel live.

A :class:`JobSpec` is written as JSON by the scheduler and read by the job
process (:mod:`spate.engine.job.main`), possibly on another machine, so it holds
only plain values.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from spate.engine.defaults import DEFAULT_EPOCH_MAX_DELAY_MS, DEFAULT_FLUSH_INTERVAL_MS

#: ``JobSpec.kind`` of a pipeline run.
RUN = "run"
#: ``JobSpec.kind`` of a preview: sinks are replaced by row events on the channel.
PREVIEW = "preview"
#: ``JobSpec.kind`` of a watcher: no Spark; it looks at an idle pipeline's sources
#: from their committed offsets and ends ``idle``, due at once, when input arrives
#: (:mod:`spate.engine.job.watch`).
WATCH = "watch"


@dataclass(frozen=True)
class JobSpec:
    """Everything a job process needs to run one pipeline."""

    job_id: str
    tenant_id: str
    #: The state store's pipeline id (stable across a pipeline's jobs, so state carries over).
    pipeline_id: str
    sql: str
    state_url: str
    checkpoint_dir: str
    #: Where the job publishes events and reads stop requests (see :mod:`.channel`).
    channel_url: str
    parallelism: int = 1
    kind: str = RUN
    #: Spark trigger interval in ms (None: rate-adaptive epochs, ``epoch_max_delay_ms``).
    checkpoint_interval_ms: int | None = None
    #: Spark master for a job that builds its own session (two cores, up to four
    #: attempts per task); a job
    #: launched by spark-submit uses the session spark-submit configured.
    spark_master: str | None = "local[2,4]"
    #: The deployment's name of the Spark cluster the job runs on (None: its default), which
    #: the backend submits it to; the job itself only reports it.
    cluster: str | None = None
    #: A preview stops after this many rows.
    preview_row_limit: int = 1000
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: The tenant's connection tables the SQL names, as
    #: :class:`spate.engine.planner.external.TableDefinition` dicts with secrets decrypted
    #: (which is why the scheduler writes spec files owner-only).
    tables: list[dict[str, Any]] = field(default_factory=list)
    #: Values of the ``{{ NAME }}`` references in the SQL's table options (the job
    #: never fills them from its host's environment).
    variables: dict[str, str] = field(default_factory=dict)
    #: The source text of the pipeline's UDF file (:mod:`spate.engine.udf`), so a job on a
    #: cluster needs no file; None: no UDFs.
    udf_source: str | None = None
    #: The name UDF errors and tracebacks give that file.
    udf_filename: str = "udfs.py"
    #: Further UDF files, ``{"filename", "source"}`` each: a tenant's UDFs kept by the
    #: service (one file per UDF), those whose names the SQL mentions.
    udf_files: list[dict[str, str]] = field(default_factory=list)
    #: pipeline.update-aggregate-flush-interval (ms; 0: every epoch)
    update_flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS
    #: What the tenant's tables may touch (:class:`~spate.engine.connectors.core.boundary.Boundary`
    #: as a dict); empty: unconfined, as ``spate run``.
    boundary: dict[str, Any] = field(default_factory=dict)
    #: A run with no input for this long stops after a commit, when its sources can say
    #: when input is due again, and ends ``idle`` (scale to zero); None: never.
    idle_stop_s: float | None = None
    #: Rate-adaptive epochs of a run with no ``checkpoint_interval_ms``: after an epoch of
    #: few rows it waits for more, at most this long (ms; 0: back to back)
    epoch_max_delay_ms: int = DEFAULT_EPOCH_MAX_DELAY_MS
    #: Which start of the job this is (0, then one more per automatic restart); the
    #: job's events carry it, so a killed attempt's last words are not taken for the next's.
    attempt: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        values: dict[str, Any] = json.loads(text)
        return cls(**values)
