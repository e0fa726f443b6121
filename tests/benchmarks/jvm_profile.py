"""Where a Spark driver's executor threads spend their time, from a Java Flight Recorder
recording: ``python -m tests.benchmarks.jvm_profile RECORDING.jfr``.

py-spy sees Python; the JVM's share of a run (decoding Arrow from the Python
workers, shuffles, the cache, Spark's expressions) needs a JVM profiler.  JFR is
part of the JDK: start the run with
``JAVA_TOOL_OPTIONS=-XX:StartFlightRecording=settings=profile``, take the
recording before the driver exits with ``jcmd <driver pid> JFR.dump
filename=RECORDING.jfr``, and this prints the samples of the executor threads (the
tasks) and of the streaming query's thread (the driver's epochs: Spate's calls
from Python run there) by what they were doing: each sample goes to the first
category (leaf first) that one of its frames belongs to.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

#: what a task's samples did: category -> substrings of its frames, in the order tried
TASK_CATEGORIES: dict[str, tuple[str, ...]] = {
    "timestamp +/- interval (java.time per row)": ("timestampAddDayTime",),
    "Python worker I/O": ("PythonRunner", "PythonArrowOutput", "ArrowStreamReader",
                          "MessageSerializer", "ReadChannel"),
    "Arrow columns to rows": ("ArrowColumnVector", "ColumnarBatchRow"),
    "observed metrics (CollectMetrics)": ("AggregatingAccumulator",),
    "cache build and scan": ("CachedRDDBuilder", "ColumnBuilder", "InMemoryTableScan",
                             "CachedBatch", "ColumnAccessor"),
    "shuffle write": ("UnsafeRowSerializerInstance$$anon$1", "DiskBlockObjectWriter",
                      "ShuffleExternalSorter", "IndexShuffleBlockResolver"),
    "shuffle read": ("ShuffleBlockFetcherIterator", "UnsafeRowSerializerInstance$$anon$2",
                     "BlockStoreShuffleReader"),
    "hash aggregate": ("UnsafeFixedWidthAggregationMap", "BytesToBytesMap",
                       "TungstenAggregationIterator"),
    "row hashing": ("Murmur3",),
    "row writing": ("UnsafeRowWriter",),
}
#: what the streaming query's thread did between and around its jobs
DRIVER_CATEGORIES: dict[str, tuple[str, ...]] = {
    "generated code compiled": ("janino", "codehaus"),
    "SQL parsed": ("antlr", "AbstractSqlParser"),
    "plans analysed": ("catalyst.analysis", "CheckAnalysis"),
    "plans optimised": ("Optimizer",),
    "physical planning": ("SparkPlanner", "QueryPlanner", "EnsureRequirements"),
    "cache manager": ("CacheManager",),
    "closures serialised": ("ObjectOutputStream", "ClosureCleaner", "JavaSerializer"),
    "checkpoint logs": ("HDFSMetadataLog", "CheckpointFileManager", "hadoop.fs"),
    "classes loaded": ("ClassLoader", "ZipFile", "JarFile"),
    "py4j calls (reflection)": ("py4j", "reflect"),
}
#: thread name prefix -> the categories of its samples
THREADS = {"Executor task launch": TASK_CATEGORIES,
           "stream execution thread": DRIVER_CATEGORIES}
_FRAME = re.compile(r"^\s+([\w$.<>]+)\(.*?\)\s+line:", re.M)
_THREAD = re.compile(r'sampledThread = "([^"]*)"')


def samples_by_category(recording: str) -> dict[str, Counter[str]]:
    """``recording``'s execution samples of each of :data:`THREADS`, by category."""
    text = subprocess.run(["jfr", "print", "--stack-depth", "40", "--events",
                           "jdk.ExecutionSample", recording], capture_output=True, text=True,
                          check=True).stdout
    counts: dict[str, Counter[str]] = {prefix: Counter() for prefix in THREADS}
    for event in text.split("jdk.ExecutionSample")[1:]:
        thread = _THREAD.search(event)
        name = thread.group(1) if thread else ""
        for prefix, categories in THREADS.items():
            if name.startswith(prefix):
                counts[prefix][_category(_FRAME.findall(event), categories)] += 1
    return counts


def _category(frames: list[str], categories: dict[str, tuple[str, ...]]) -> str:
    for frame in frames:
        for name, parts in categories.items():
            if any(part in frame for part in parts):
                return name
    return "other"


def main(recording: str) -> None:
    for thread, counts in samples_by_category(recording).items():
        total = sum(counts.values())
        print(f"{thread}: {total} samples")
        for name, count in counts.most_common():
            print(f"{count:6d} {100 * count / max(total, 1):5.1f}%  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
