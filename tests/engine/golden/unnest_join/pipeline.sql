-- case: UNNEST inside a view, the view then JOINed: an updating (inner) join of the
-- unnested tags with the topics users follow, and a LEFT windowed join of per-tag post
-- counts (a view that unnests and aggregates over TUMBLE(10s)) with per-topic follow
-- counts.  Post 3's empty and post 5's NULL array give no rows; post 7 names sql twice,
-- so it gives two sql rows.  Two lines per epoch per source.
-- Expected output: DuckDB batch SQL over the two inputs (each source is in event-time
-- order and the pipeline's watermark is their minimum, so no row is late): the same
-- joins over unnest(tags), the window start being
-- epoch_us(ts) - epoch_us(ts) % 10_000_000, with the window equality in the ON clause.
CREATE TABLE posts (id BIGINT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/posts.jsonl', format = 'json', type = 'source', max_lines_per_batch = '2');
CREATE TABLE follows (topic TEXT, "user" TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/follows.jsonl', format = 'json', type = 'source', max_lines_per_batch = '2');
CREATE TABLE readers WITH (connector = 'single_file', path = '{{ OUT_DIR }}/readers.jsonl', format = 'json', type = 'sink');
CREATE TABLE per_window (tag TEXT, window_start TIMESTAMP, posts BIGINT, follows BIGINT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/per_window.jsonl', format = 'json', type = 'sink');
CREATE VIEW post_tags AS SELECT id, UNNEST(tags) AS tag FROM posts;
CREATE VIEW tag_counts AS
SELECT UNNEST(tags) AS tag, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
FROM posts GROUP BY 1, 2;
INSERT INTO readers
SELECT t.id, t.tag, f.user AS reader FROM post_tags AS t JOIN follows AS f ON t.tag = f.topic;
INSERT INTO per_window
SELECT p.tag, p.w.start, p.n AS posts, f.n AS follows
FROM tag_counts AS p
LEFT JOIN (SELECT topic, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
           FROM follows GROUP BY 1, 2) AS f
ON p.tag = f.topic;
