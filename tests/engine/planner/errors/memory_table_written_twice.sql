-- expect: 7:13: memory table 'm' is written twice
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
CREATE TABLE m (page TEXT);
INSERT INTO m SELECT page FROM a;
INSERT INTO m SELECT upper(page) FROM a;
INSERT INTO out SELECT * FROM m;
