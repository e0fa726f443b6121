-- case: windowed joins of two sources' HOP(5s slide, 10s width) aggregates: INNER (with a
-- non-equi ON term) and FULL, three and two lines per epoch.  Every row counts in two
-- windows, so a store's order and return 5-9 s apart meet in one window and miss in the
-- other (s1's order at 33s and return at 27s meet only in [25s,35s)); s4 only returns;
-- s2's order and return meet in [0s,10s) but fail the INNER join's s.qty > r.qty.
-- Expected output: DuckDB batch SQL over the two inputs (each source is in event-time
-- order and the pipeline's watermark is their minimum, so no row is late): each row
-- assigned to the windows starting at every multiple of 5 s in (ts - 10 s, ts],
-- aggregated per (store, window), the per-side aggregates joined on store and window.
CREATE TABLE orders (store TEXT, qty BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/orders.jsonl', format = 'json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE returns (store TEXT, qty BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/returns.jsonl', format = 'json', type = 'source', max_lines_per_batch = '2');
CREATE TABLE net WITH (connector = 'single_file', path = '{{ OUT_DIR }}/net.jsonl', format = 'json', type = 'sink');
CREATE TABLE activity WITH (connector = 'single_file', path = '{{ OUT_DIR }}/activity.jsonl', format = 'json', type = 'sink');
CREATE VIEW sold AS
SELECT store, HOP(INTERVAL '5' SECOND, INTERVAL '10' SECOND) AS window, sum(qty) AS qty
FROM orders GROUP BY 1, 2;
CREATE VIEW returned AS
SELECT store, HOP(INTERVAL '5' SECOND, INTERVAL '10' SECOND) AS window, sum(qty) AS qty
FROM returns GROUP BY 1, 2;
INSERT INTO net
SELECT s.store, s.window.start AS window_start, s.window.end AS window_end,
       s.qty - r.qty AS net_qty
FROM sold AS s JOIN returned AS r ON s.store = r.store AND s.qty > r.qty;
INSERT INTO activity
SELECT coalesce(s.store, r.store) AS store, coalesce(s.window.end, r.window.end) AS window_end,
       s.qty AS sold, r.qty AS returned
FROM sold AS s FULL OUTER JOIN returned AS r ON s.store = r.store;
