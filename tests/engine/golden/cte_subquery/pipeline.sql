-- case: WITH CTEs, one reading another, over nested FROM subqueries, feeding a TUMBLE
-- aggregate written directly (no outer SELECT) and a stateless query using a CTE
CREATE TABLE clicks (page TEXT, "user" TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '5');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
CREATE TABLE visits WITH (connector = 'single_file', path = '{{ OUT_DIR }}/visits.jsonl', format = 'json', type = 'sink');
INSERT INTO counts
WITH pages AS (SELECT page, "user" FROM (SELECT * FROM clicks WHERE page <> '/c')),
     named AS (SELECT upper(page) AS page FROM pages)
SELECT page, count(*) AS n FROM named GROUP BY page, TUMBLE(INTERVAL '10' SECOND);
INSERT INTO visits
WITH u AS (SELECT "user" AS who, page FROM clicks)
SELECT who, page FROM (SELECT * FROM u WHERE who = 'u1');
