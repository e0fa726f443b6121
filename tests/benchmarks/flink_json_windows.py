"""What a Flink SQL user writes for the same windowed count (the benchmark's Flink
side): ``python flink_json_windows.py FILE WIDTH_S SLIDE_S``, run by the Python of
a separate environment holding the ``apache-flink`` package (its jars included).

Flink's own filesystem source and JSON format, the window table-valued function
(``TABLE(HOP(...))``, or ``TUMBLE`` when width equals slide) per key, parallelism
2, streaming mode with the same watermark as Spate's table.  The windows go to
Flink's ``blackhole`` sink; a global ``count(*)`` of them goes to the ``print``
sink in mini-batches, and the last count printed is the number of windows
(printed last on stdout, as the Spark script does).
"""

from __future__ import annotations

import sys

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(path: str, width_s: int, slide_s: int) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "2")
    config.set("table.local-time-zone", "UTC")
    # The global count below emits once a second, not once per window.
    config.set("table.exec.mini-batch.enabled", "true")
    config.set("table.exec.mini-batch.allow-latency", "1 s")
    config.set("table.exec.mini-batch.size", "100000")
    env.execute_sql(f"""
        CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP_LTZ(3),
                             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json',
              'json.timestamp-format.standard' = 'ISO-8601')""")
    env.execute_sql("CREATE TABLE windows (k BIGINT, w TIMESTAMP(3), n BIGINT) "
                    "WITH ('connector' = 'blackhole')")
    env.execute_sql("CREATE TABLE total (n BIGINT) WITH ('connector' = 'print', "
                    "'print-identifier' = 'windows')")
    if width_s == slide_s:
        window = f"TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '{width_s}' SECOND)"
    else:
        window = (f"HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '{slide_s}' SECOND, "
                  f"INTERVAL '{width_s}' SECOND)")
    env.execute_sql(f"""CREATE TEMPORARY VIEW counts AS
        SELECT k, window_start AS w, count(*) AS n FROM TABLE({window})
        GROUP BY k, window_start, window_end""")
    statements = env.create_statement_set()
    statements.add_insert_sql("INSERT INTO windows SELECT k, w, n FROM counts")
    statements.add_insert_sql("INSERT INTO total SELECT count(*) FROM counts")
    statements.execute().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
