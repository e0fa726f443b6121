-- case: windowed joins of two sources' TUMBLE(10s) aggregates, INNER, LEFT, RIGHT and FULL,
-- each with a non-equi ON term (b.spent > c.clicks), into four sinks; four and three lines
-- per epoch.  Users u3/u4 have windows with clicks but no buys, u5 buys but never clicks;
-- [20s,30s) and [50s,60s) hold buys only, [40s,50s) clicks only.  In [0s,10s) u2's clicks
-- (1) and buys (1) are keyed alike but fail the non-equi term: unmatched on both sides.
-- Expected output: DuckDB batch SQL over the two inputs (each source is in event-time
-- order and the pipeline's watermark is their minimum, so no row is late): the same joins
-- of the per-(user, window) aggregates, the window start being
-- epoch_us(ts) - epoch_us(ts) % 10_000_000, with the window equality in every ON clause.
CREATE TABLE clicks ("user" TEXT, page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '4');
CREATE TABLE buys ("user" TEXT, amount BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/buys.jsonl', format = 'json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE inner_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/inner.jsonl', format = 'json', type = 'sink');
CREATE TABLE left_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/left.jsonl', format = 'json', type = 'sink');
CREATE TABLE right_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/right.jsonl', format = 'json', type = 'sink');
CREATE TABLE full_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/full.jsonl', format = 'json', type = 'sink');
CREATE VIEW click_counts AS
SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS window, count(*) AS clicks FROM clicks GROUP BY 1, 2;
CREATE VIEW spending AS
SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS window, sum(amount) AS spent FROM buys GROUP BY 1, 2;
INSERT INTO inner_out
SELECT c.user, c.window.start AS window_start, c.window.end AS window_end, c.clicks, b.spent
FROM (SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS window, count(*) AS clicks
      FROM clicks GROUP BY 1, 2) AS c
JOIN (SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS window, sum(amount) AS spent
      FROM buys GROUP BY 1, 2) AS b
ON c.user = b.user AND b.spent > c.clicks;
INSERT INTO left_out
SELECT c.user, c.window.start AS window_start, c.clicks, b.spent
FROM click_counts AS c LEFT JOIN spending AS b
ON c.window = b.window AND c.user = b.user AND b.spent > c.clicks;
INSERT INTO right_out
SELECT b.user, b.window.start AS window_start, c.clicks, b.spent
FROM click_counts AS c RIGHT OUTER JOIN spending AS b ON c.user = b.user AND b.spent > c.clicks;
INSERT INTO full_out
SELECT coalesce(c.window.start, b.window.start) AS window_start, c.user AS clicker,
       b.user AS buyer, c.clicks, b.spent
FROM click_counts AS c FULL JOIN spending AS b ON c.user = b.user AND b.spent > c.clicks;
