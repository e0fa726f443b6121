-- case: HOP(5s, 15s), watermark = max event time, one line per epoch.
-- Epoch 1 (12s) fires [-10s,5s) and [-5s,10s).  Epoch 2's row at 3s is behind the
-- watermark but [0s,15s) is still open: it counts there (and only there), and its price
-- becomes that window's max.  Epoch 3 (20s) fires [0s,15s) and [5s,20s).  Epoch 4's row
-- at 2s has every window fired: late, dropped.  End of input fires the rest.
CREATE TABLE bids (price BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT w.start AS window_start, w.end AS window_end, n, high
FROM (SELECT HOP(INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS w, count(*) AS n,
             max(price) AS high
      FROM bids GROUP BY w);
