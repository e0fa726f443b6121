-- case: SESSION(5s) per bidder, watermark 5 s behind, two lines per epoch.
-- Epoch 1 leaves bidder 7 with sessions [1s,6s) and [10s,15s); in epoch 2 the row at
-- 5.5s bridges them into [1s,15s), and the watermark (20s - 5s) fires it.  The row at 3s
-- in epoch 3 would only make a session [3s,8s) that has already closed: late, dropped.
-- End of input fires bidder 9's [20s,29s).
CREATE TABLE bids (bidder BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT bidder, s.start AS session_start, s.end AS session_end, bids, spent
FROM (SELECT bidder, SESSION(INTERVAL '5' SECOND) AS s, count(*) AS bids, sum(price) AS spent
      FROM bids GROUP BY bidder, s);
