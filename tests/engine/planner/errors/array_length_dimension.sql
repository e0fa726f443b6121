-- expect: 3:27: array_length(): dimensions other than 1 are not supported yet
CREATE TABLE t (grid BIGINT[]) WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT array_length(grid, 3) FROM t;
