-- expect: 5:46: UNION ALL needs identical schemas
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT page FROM a UNION ALL SELECT page, ts FROM a;
