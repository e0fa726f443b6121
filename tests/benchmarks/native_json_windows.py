"""What a Spark user writes for a windowed count over a JSON file (the benchmark's
native side): ``python native_json_windows.py FILE WIDTH_S SLIDE_S``.

Spark's own JSON reader with the schema given, ``window()`` per key, written to
the ``noop`` sink; prints the number of windows last (counted by an observation
during that same write, so no second pass).
"""

from __future__ import annotations

import sys

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F


def main(path: str, width_s: int, slide_s: int) -> None:
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .getOrCreate())
    events = spark.read.schema("k BIGINT, v BIGINT, ts TIMESTAMP").json(path)
    counts = events.groupBy("k", F.window("ts", f"{width_s} seconds", f"{slide_s} seconds")) \
        .count()
    windows = Observation("windows")
    counts.observe(windows, F.count(F.lit(1)).alias("n")).write.format("noop") \
        .mode("overwrite").save()
    print(windows.get["n"])
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
