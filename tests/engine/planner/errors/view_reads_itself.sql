-- expect: 4:35: 'w' refers to itself
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE VIEW w AS SELECT page FROM w;
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT * FROM w;
