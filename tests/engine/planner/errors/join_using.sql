-- expect: 4:23: JOIN ... USING is not supported yet; write ON a.k = b.k
CREATE TABLE a (k BIGINT, x TEXT) WITH (connector = 'single_file', path = 'a.jsonl', format = 'json', type = 'source');
CREATE TABLE b (k BIGINT, y TEXT) WITH (connector = 'single_file', path = 'b.jsonl', format = 'json', type = 'source');
SELECT k, x, y FROM a LEFT JOIN b USING (k);
