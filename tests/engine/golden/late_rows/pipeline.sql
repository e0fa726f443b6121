-- case: out-of-order rows within the 5 s delay count; rows for fired windows are late and dropped
-- Two lines per epoch.  Epoch 0 (1s, 3s): wm -2s.  Epoch 1 (12s, 8s): wm 7s, nothing fires, 8s
-- is out of order but on time.  Epoch 2 (25s, 2s): wm 20s fires [0,10) with 1s,3s,8s and 2s
-- (2s arrived while [0,10) was still open).  Epoch 3 (18s, 31s): wm 26s; 18s is late
-- ([10,20) fired at wm 20s) and dropped.  End of input fires [20,30) and [30,40).
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT w.start AS window_start, n, total
FROM (SELECT TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n, sum(price) AS total
      FROM bids GROUP BY w);
