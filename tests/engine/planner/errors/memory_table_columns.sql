-- expect: 6:15: INSERT INTO m gives 1 columns but memory table 'm' declares 2
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
CREATE TABLE m (page TEXT, n BIGINT);
INSERT INTO m SELECT page FROM a;
INSERT INTO out SELECT * FROM m;
