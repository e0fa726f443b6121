-- expect: 6:31: memory table 'm' is read before it is written
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
CREATE TABLE m (page TEXT);
INSERT INTO out SELECT * FROM m;
INSERT INTO m SELECT page FROM a;
