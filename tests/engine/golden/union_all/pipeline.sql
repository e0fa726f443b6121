-- case: UNION ALL of two sources of one schema, written as it is (stateless) and counted
-- per page in one TUMBLE aggregate fed by both sources
CREATE TABLE clicks (page TEXT, "user" TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '5');
CREATE TABLE views (page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/views.jsonl', format = 'json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE hits WITH (connector = 'single_file', path = '{{ OUT_DIR }}/hits.jsonl', format = 'json', type = 'sink');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
INSERT INTO hits SELECT page, 'click' AS kind FROM clicks UNION ALL SELECT page, 'view' AS kind FROM views;
INSERT INTO counts SELECT page, w.start AS window_start, n
FROM (SELECT page, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
      FROM (SELECT page, ts FROM clicks UNION ALL SELECT page, ts FROM views)
      GROUP BY page, w);
