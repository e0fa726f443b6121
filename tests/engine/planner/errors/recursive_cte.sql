-- expect: 6:1: recursive CTEs (WITH RECURSIVE) are not supported
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
WITH RECURSIVE r AS (SELECT page FROM a) SELECT page FROM r;
