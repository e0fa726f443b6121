-- case: UNNEST inside views over array_agg of DECIMAL(10, 3) and BIGINT UNSIGNED
-- (DECIMAL(20, 0)) values collected per TUMBLE window (as in Arroyo's unnest_in_view):
-- each element keeps its DECIMAL type and scale (1.500, not 1.5) and every digit
-- (2^64 - 1 and 2^53 + 1 are not doubles), NULL elements stay; two lines per epoch, so
-- the collected values pass through state.  Expected: DuckDB, unnest(list(x)) per
-- 10-second window.
CREATE TABLE sales (id BIGINT UNSIGNED NOT NULL, amount DECIMAL(10, 3),
                    ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/sales.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE VIEW per_window AS
SELECT TUMBLE(INTERVAL '10' SECOND) AS w, array_agg(amount) AS amounts, array_agg(id) AS ids
FROM sales GROUP BY w;
CREATE VIEW sold AS SELECT w.start AS window_start, UNNEST(amounts) AS amount FROM per_window;
CREATE VIEW sellers AS SELECT w.start AS window_start, UNNEST(ids) AS id FROM per_window;
CREATE TABLE amounts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/amounts.jsonl',
                           format = 'json', type = 'sink');
CREATE TABLE ids WITH (connector = 'single_file', path = '{{ OUT_DIR }}/ids.jsonl',
                       format = 'json', type = 'sink');
INSERT INTO amounts SELECT window_start, amount FROM sold;
INSERT INTO ids SELECT window_start, id FROM sellers;
