-- expect: 6:13: cannot INSERT INTO view 'v'
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
CREATE VIEW v AS SELECT page FROM a;
INSERT INTO v SELECT page FROM a;
