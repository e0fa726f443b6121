-- case: window functions over a TUMBLE(10s) count per page, five lines per epoch:
-- row_number() top-2 per window (ties broken by page), rank() and dense_rank() with tied
-- counts ([0s,10s): /b and /c both 2; [10s,20s): /a and /b both 1), lag()/lead() by page
-- (NULL at each window's edge; [20s,30s) holds one page only).
-- Expected output: DuckDB batch SQL over the input (in event-time order, so no row is
-- late): the same window functions over the per-(page, window) counts, the window start
-- being epoch_us(ts) - epoch_us(ts) % 10_000_000, partitioned by the window.
CREATE TABLE hits (page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/hits.jsonl', format = 'json', type = 'source', max_lines_per_batch = '5');
CREATE TABLE top2 WITH (connector = 'single_file', path = '{{ OUT_DIR }}/top2.jsonl', format = 'json', type = 'sink');
CREATE TABLE ranked WITH (connector = 'single_file', path = '{{ OUT_DIR }}/ranked.jsonl', format = 'json', type = 'sink');
CREATE TABLE neighbours WITH (connector = 'single_file', path = '{{ OUT_DIR }}/neighbours.jsonl', format = 'json', type = 'sink');
CREATE VIEW page_views AS
SELECT page, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS views FROM hits GROUP BY 1, 2;
INSERT INTO top2
SELECT page, w.start AS window_start, views, rn FROM (
  SELECT page, w, views, row_number() OVER (PARTITION BY w ORDER BY views DESC, page) AS rn
  FROM (SELECT page, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS views
        FROM hits GROUP BY 1, 2))
WHERE rn <= 2;
INSERT INTO ranked
SELECT page, w.start AS window_start, views,
       rank() OVER (PARTITION BY w ORDER BY views DESC) AS rk,
       dense_rank() OVER (PARTITION BY w ORDER BY views DESC) AS dense_rk
FROM page_views;
INSERT INTO neighbours
SELECT page, w.start AS window_start, views,
       lag(views) OVER (PARTITION BY w ORDER BY page) AS prev_views,
       lead(page) OVER (PARTITION BY w ORDER BY page) AS next_page
FROM page_views;
