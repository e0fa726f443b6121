-- case: UNNEST of an array column in the SELECT list: a row per element (none for an
-- empty or NULL array), written as it is and counted per tag in a TUMBLE aggregate
CREATE TABLE posts (id BIGINT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/posts.jsonl', format = 'json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE tagged WITH (connector = 'single_file', path = '{{ OUT_DIR }}/tagged.jsonl', format = 'json', type = 'sink');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
INSERT INTO tagged SELECT id, UNNEST(tags) AS tag, cardinality(tags) AS of_tags FROM posts WHERE id <> 2;
INSERT INTO counts SELECT tag, w.start AS window_start, n
FROM (SELECT UNNEST(tags) AS tag, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
      FROM posts GROUP BY 1, 2);
