"""Where a Spark driver's executor threads spend their time, from a Java Flight Recorder
recording: ``python -m tests.benchmarks.jvm_profile RECORDING.jfr``.

py-spy sees Python; the JVM's share of a run (decoding Arrow from the Python
workers, shuffles, the cache, Spark's expressions) needs a JVM profiler.  JFR is
part of the JDK: start the run with
``JAVA_TOOL_OPTIONS=-XX:StartFlightRecording=settings=profile``, take the
recording before the driver exits with ``jcmd <driver pid> JFR.dump
filename=RECORDING.jfr``, and this prints the executor threads' samples by what
they were doing: each sample goes to the first category (leaf first) that one of
its frames belongs to.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

#: category -> substrings of the frames that belong to it, in the order tried
CATEGORIES: dict[str, tuple[str, ...]] = {
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
_FRAME = re.compile(r"^\s+([\w$.<>]+)\(.*?\)\s+line:", re.M)


def executor_samples(recording: str) -> Counter[str]:
    """The executor threads' execution samples of ``recording`` by category."""
    text = subprocess.run(["jfr", "print", "--stack-depth", "40", "--events",
                           "jdk.ExecutionSample", recording], capture_output=True, text=True,
                          check=True).stdout
    counts: Counter[str] = Counter()
    for event in text.split("jdk.ExecutionSample")[1:]:
        if "Executor task launch" not in event:
            continue
        counts[_category(_FRAME.findall(event))] += 1
    return counts


def _category(frames: list[str]) -> str:
    for frame in frames:
        for name, parts in CATEGORIES.items():
            if any(part in frame for part in parts):
                return name
    return "other"


def main(recording: str) -> None:
    counts = executor_samples(recording)
    total = sum(counts.values())
    print(f"{total} executor samples")
    for name, count in counts.most_common():
        print(f"{count:6d} {100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
