-- case: a view read by two INSERT INTO of one pipeline (source read once): a stateless
-- query and a TUMBLE aggregate
CREATE TABLE clicks (page TEXT, "user" TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '5');
CREATE VIEW a_clicks AS SELECT "user", ts FROM clicks WHERE page = '/a';
CREATE TABLE users WITH (connector = 'single_file', path = '{{ OUT_DIR }}/users.jsonl', format = 'json', type = 'sink');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
INSERT INTO users SELECT "user" FROM a_clicks;
INSERT INTO counts SELECT w.start AS window_start, n, users
FROM (SELECT TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n, count(DISTINCT "user") AS users
      FROM a_clicks GROUP BY w);
