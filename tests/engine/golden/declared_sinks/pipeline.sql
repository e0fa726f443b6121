-- case: INSERT INTO a sink with declared columns writes the sink's names, by position,
-- each value cast to its column's type, for every query shape: a plain projection
-- (a number into a TEXT column is written as a string), a TUMBLE aggregate (w.start,
-- w.end into w_start, w_end), a windowed self-join of two views, an updating
-- aggregate into a debezium_json sink keyed by its PRIMARY KEY, and a UNION ALL.
-- Two lines per epoch, a flush every epoch.  Worked by hand:
--   plain: one row per click, amount as text, doubled as DOUBLE.
--   windows [0s,10s) a1 b2 a3, [10s,20s) c4 a5, [20s,30s) b6: counts 3, 2, 1.
--   join of per-(user, window) counts and sums: (a,[0,10)) 2 clicks, total 4;
--     (b,[0,10)) 1, 2; (c,[10,20)) 1, 4; (a,[10,20)) 1, 5; (b,[20,30)) 1, 6.
--   per user after each epoch: {a:1,b:1}, {a:2,b:1,c:1}, {a:3,b:2,c:1}: a created,
--     b created; a updated 1->2, c created; a updated 2->3, b updated 1->2.
--   union: users a, b of n < 3 as they are, and upper-cased users of n > 4 with n x 10.
-- update-flush-interval-ms: 0
CREATE TABLE clicks ("user" TEXT, n BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/clicks.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE plain_out (who TEXT, amount TEXT, doubled DOUBLE)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/plain.jsonl', format = 'json',
      type = 'sink');
CREATE TABLE windowed_out (w_start TIMESTAMP, w_end TIMESTAMP, drivers BIGINT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/windowed.jsonl', format = 'json',
      type = 'sink');
CREATE TABLE joined_out (buyer TEXT, window_end TIMESTAMP, clicks INT, total TEXT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/joined.jsonl', format = 'json',
      type = 'sink');
CREATE TABLE per_user (who TEXT PRIMARY KEY, clicks BIGINT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/per_user.jsonl',
      format = 'debezium_json', type = 'sink');
CREATE TABLE union_out (name TEXT, value BIGINT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/union.jsonl', format = 'json',
      type = 'sink');
CREATE VIEW counts AS
SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS c FROM clicks GROUP BY 1, 2;
CREATE VIEW sums AS
SELECT "user", TUMBLE(INTERVAL '10' SECOND) AS w, sum(n) AS s FROM clicks GROUP BY 1, 2;
INSERT INTO plain_out SELECT "user", n, n * 2 FROM clicks;
INSERT INTO windowed_out
SELECT w.start, w.end, n
FROM (SELECT TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n FROM clicks GROUP BY w);
INSERT INTO joined_out
SELECT c.user, c.w.end, c.c, s.s FROM counts AS c JOIN sums AS s ON c.user = s.user;
INSERT INTO per_user SELECT "user", count(*) FROM clicks GROUP BY "user";
INSERT INTO union_out
SELECT "user", n FROM clicks WHERE n < 3
UNION ALL
SELECT upper("user"), n * 10 FROM clicks WHERE n > 4;
