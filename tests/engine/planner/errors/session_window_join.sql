-- expect: 5:14: SESSION windows cannot be joined (a windowed join of SESSION windows is not supported yet); use TUMBLE or HOP
CREATE TABLE a (k BIGINT, at TIMESTAMP NOT NULL, WATERMARK FOR at) WITH (connector = 'single_file', path = 'a.jsonl', format = 'json', type = 'source');
SELECT x.k, x.n, y.n
FROM (SELECT k, SESSION(INTERVAL '5' SECOND) AS w, count(*) AS n FROM a GROUP BY 1, 2) x
JOIN (SELECT k, SESSION(INTERVAL '5' SECOND) AS w, count(*) AS n FROM a GROUP BY 1, 2) y
ON x.k = y.k AND x.w = y.w;
