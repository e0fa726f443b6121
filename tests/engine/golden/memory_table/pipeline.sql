-- case: a memory table written by one INSERT INTO (columns by position, cast to the declared
-- types) and read by two later queries: one stateless, one TUMBLE aggregate
CREATE TABLE clicks (page TEXT, "user" TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json', type = 'source', max_lines_per_batch = '5');
CREATE TABLE labelled (who TEXT, section TEXT, at TIMESTAMP);
CREATE TABLE from_u2 WITH (connector = 'single_file', path = '{{ OUT_DIR }}/from_u2.jsonl', format = 'json', type = 'sink');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
INSERT INTO labelled SELECT "user", substr(page, 2), ts FROM clicks;
INSERT INTO from_u2 SELECT section FROM labelled WHERE who = 'u2';
INSERT INTO counts SELECT section, w.start AS window_start, n
FROM (SELECT section, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n FROM labelled
      GROUP BY section, w);
