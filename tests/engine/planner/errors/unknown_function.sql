-- expect: 4:8: unknown function 'json_gett' (did you mean json_get?)
CREATE TABLE t (payload JSON, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT json_gett(payload, 'a') AS a,
       lower(payload) AS b FROM t;
