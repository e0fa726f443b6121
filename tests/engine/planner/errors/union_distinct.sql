-- expect: 5:36: UNION (DISTINCT) is not supported in a streaming query; use UNION ALL
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT page FROM a UNION SELECT page FROM a;
