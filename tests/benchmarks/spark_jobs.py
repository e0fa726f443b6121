"""Where a process's Spark time went: its jobs, from Spark's own event log.

A py-spy profile shows Python; the JVM's part of a run (how many Spark jobs an
epoch runs, how long each takes, how much of it its tasks ran, and the gaps
in between, when only the driver works) is in the event log Spark writes when
``spark.eventLog.enabled`` is set.  :func:`event_log_env` gives a process the
settings to write one (through ``SPARK_CONF_DIR``, which every Spark driver
reads, ``spate run`` and a Spark user's script alike); :func:`summarize` turns
it into a table, a row per job.  ``run_measured`` does both for each profiled
run (``SPATE_BENCH_PROFILE``): ``<run>.jobs.txt`` beside its py-spy stacks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def event_log_env(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a Spark driver that writes its event log, uncompressed, into
    ``folder/events`` (its settings in ``folder/conf``)."""
    events, conf = folder / "events", folder / "conf"
    events.mkdir(parents=True, exist_ok=True)
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        "spark.eventLog.enabled true\n"
        f"spark.eventLog.dir {events.resolve().as_uri()}\n"
        "spark.eventLog.compress false\n")
    return {**env, "SPARK_CONF_DIR": str(conf)}


@dataclass
class Job:
    number: int
    #: seconds from the application's start
    start_s: float
    end_s: float
    #: what ran it: the call site of the action (``count``, ``collect``, a sink's ``save``)
    action: str
    stages: int = 0
    tasks: int = 0
    #: the tasks' summed run time and CPU time in the JVM (s)
    task_s: float = 0.0
    task_cpu_s: float = 0.0
    stage_ids: list[int] = field(default_factory=list)


def read_jobs(log: Path) -> tuple[list[Job], float]:
    """The jobs of one event log (a file, or a folder of its rolled parts), and the
    application's length in seconds."""
    parts = sorted(log.glob("events_*")) if log.is_dir() else [log]
    started = ended = 0
    jobs: dict[int, Job] = {}
    stage_job: dict[int, int] = {}
    for part in parts:
        for line in part.read_text().splitlines():
            event: dict[str, Any] = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerApplicationStart":
                started = event["Timestamp"]
            elif kind == "SparkListenerApplicationEnd":
                ended = event["Timestamp"]
            elif kind == "SparkListenerJobStart":
                infos = event.get("Stage Infos", [])
                action = infos[-1]["Stage Name"].split(" at ")[0] if infos else "?"
                job = Job(event["Job ID"], (event["Submission Time"] - started) / 1000, 0.0,
                          action, stage_ids=list(event["Stage IDs"]))
                jobs[job.number] = job
                stage_job.update({stage: job.number for stage in job.stage_ids})
            elif kind == "SparkListenerJobEnd":
                jobs[event["Job ID"]].end_s = (event["Completion Time"] - started) / 1000
            elif kind == "SparkListenerStageCompleted":
                number = stage_job.get(event["Stage Info"]["Stage ID"])
                if number is not None:
                    jobs[number].stages += 1
            elif kind == "SparkListenerTaskEnd":
                number = stage_job.get(event["Stage ID"])
                metrics = event.get("Task Metrics") or {}
                if number is not None:
                    jobs[number].tasks += 1
                    jobs[number].task_s += metrics.get("Executor Run Time", 0) / 1000
                    jobs[number].task_cpu_s += metrics.get("Executor CPU Time", 0) / 1e9
    length = (ended - started) / 1000 if ended else 0.0
    return sorted(jobs.values(), key=lambda job: job.number), length


def summarize(log: Path) -> str:
    """A row per job: when it ran, how long, its stages and tasks, its tasks' run and
    CPU time, and the gap before it (driver only); totals last."""
    jobs, length = read_jobs(log)
    lines = ["job  start_s    s  gap_s stages tasks task_s cpu_s action"]
    previous_end = 0.0
    for job in jobs:
        gap = job.start_s - previous_end if previous_end else 0.0
        lines.append(f"{job.number:3d} {job.start_s:7.2f} {job.end_s - job.start_s:5.2f} "
                     f"{gap:6.2f} {job.stages:6d} {job.tasks:5d} {job.task_s:6.2f} "
                     f"{job.task_cpu_s:5.2f} {job.action}")
        previous_end = job.end_s
    in_jobs = sum(job.end_s - job.start_s for job in jobs)
    before = jobs[0].start_s if jobs else 0.0
    lines.append(f"{len(jobs)} jobs, {in_jobs:.2f} s in jobs; first job at {before:.2f} s; "
                 f"application {length:.2f} s")
    return "\n".join(lines) + "\n"


def summarize_into(folder: Path, output: Path) -> None:
    """The event log(s) written into ``folder/events`` summed up in ``output``."""
    logs = sorted((folder / "events").glob("*"))
    output.write_text("".join(summarize(log) for log in logs))
