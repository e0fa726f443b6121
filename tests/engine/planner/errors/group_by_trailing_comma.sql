-- expect: 5:14: syntax error: GROUP BY ends with a comma
CREATE TABLE rides (zone TEXT, fare DOUBLE, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT zone, count(*) AS n FROM rides
GROUP BY zone,;
