-- expect: UNION ALL of a windowed aggregate's output is not supported yet
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT page, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM a GROUP BY 1, 2
UNION ALL SELECT page, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM a GROUP BY 1, 2;
