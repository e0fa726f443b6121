-- case: two sources of different lengths in one pipeline, each feeding its own window query
CREATE TABLE clicks (page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '1');
CREATE TABLE views (page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/views.jsonl', format = 'json', type = 'source', max_lines_per_batch = '1');
CREATE TABLE click_counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/click_counts.jsonl', format = 'json', type = 'sink');
CREATE TABLE view_counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/view_counts.jsonl', format = 'json', type = 'sink');
INSERT INTO click_counts SELECT page, w.start AS window_start, n
FROM (SELECT page, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n FROM clicks GROUP BY page, w);
INSERT INTO view_counts SELECT page, w.start AS window_start, n
FROM (SELECT page, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n FROM views GROUP BY page, w);
