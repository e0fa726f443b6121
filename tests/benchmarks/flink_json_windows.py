"""What a Flink SQL user writes for the same windowed count (the benchmark's Flink
side): ``python flink_json_windows.py FILE WIDTH_S SLIDE_S``, run by the Python of
a separate environment holding the ``apache-flink`` package (its jars included).

Flink's own filesystem source and JSON format, the window table-valued function
(``TABLE(HOP(...))``, or ``TUMBLE`` when width equals slide) per key, parallelism
2, streaming mode with the same watermark as Spate's table.  The windows go to
Flink's ``blackhole`` sink; they are also counted by a second window over the
first's ``window_time`` (one day: the whole input), whose one row goes to the
``print`` sink — the number of windows, printed last on stdout as the Spark
script prints it.  (A global ``count(*)`` instead would emit a change per window,
or with mini-batches keep the job from ending for minutes after its input.)
"""

from __future__ import annotations

import sys

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(path: str, width_s: int, slide_s: int) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "2")
    config.set("table.local-time-zone", "UTC")
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
        window = f"TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '{width_s}' SECOND(6))"
    else:
        window = (f"HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '{slide_s}' SECOND(6), "
                  f"INTERVAL '{width_s}' SECOND(6))")
    env.execute_sql(f"""CREATE TEMPORARY VIEW counts AS
        SELECT k, window_start AS w, window_time AS wt, count(*) AS n FROM TABLE({window})
        GROUP BY k, window_start, window_end, window_time""")
    statements = env.create_statement_set()
    statements.add_insert_sql("INSERT INTO windows SELECT k, w, n FROM counts")
    statements.add_insert_sql(
        "INSERT INTO total SELECT count(*) FROM TABLE(TUMBLE(TABLE counts, DESCRIPTOR(wt), "
        "INTERVAL '1' DAY)) GROUP BY window_start, window_end")
    statements.execute().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
