-- expect: 3:33: extract_json_string(): JSONPath '$.items[*].id' is not supported yet; use a path from '$' of .field and [index] steps, without wildcards
CREATE TABLE t (doc TEXT) WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT extract_json_string(doc, '$.items[*].id') FROM t;
