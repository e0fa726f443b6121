-- case: an idle partition stops holding the watermark back.
-- unbounded: the impulse source never ends; the run stops once the expected output is written.
-- `ticks` emits one row at start (event time: now, on its first partition), then nothing
-- for 1000 s; with idle_micros = 1 it is idle from the next epoch on.  Its watermark (now - 1s)
-- would otherwise hold back every window of `bids` (dated 2100) forever.  Idle, it does
-- not: epoch 1 (15s) fires [0s,10s), so the row at 5s in epoch 2 is late and dropped.
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '0.001', idle_micros = '1');
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1');
CREATE TABLE tick_sink WITH (connector = 'blackhole');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO tick_sink SELECT counter FROM ticks;
INSERT INTO out
SELECT w.start AS window_start, n, total
FROM (SELECT TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n, sum(price) AS total
      FROM bids GROUP BY w);
