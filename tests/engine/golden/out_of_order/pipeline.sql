-- case: rows up to 9 s out of order, watermark 10 s behind, one line per epoch: no row
-- is late, so the result equals the batch aggregation
CREATE TABLE readings (sensor TEXT, reading BIGINT, ts TIMESTAMP NOT NULL,
                       WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/readings.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT sensor, w.start AS window_start, n, low, high, total
FROM (SELECT sensor, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n, min(reading) AS low,
             max(reading) AS high, sum(reading) AS total
      FROM readings GROUP BY sensor, w);
