-- expect: 5:43: several UNNESTs in one SELECT
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT UNNEST(tags) AS t, UNNEST(ARRAY[page]) AS p FROM a;
