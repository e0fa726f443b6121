-- expect: 4:16: no field 'qq' in 'a.xs[1]' (did you mean 'q'?)
CREATE TABLE a (id BIGINT, xs STRUCT<q BIGINT>[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT a.xs[1].qq AS first_q FROM a;
