-- expect: 3:38: regexp_replace(): flag 'U' is not supported yet (supported: g, i, m, s)
CREATE TABLE t (s TEXT) WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT regexp_replace(s, 'a+?', 'b', 'gU') FROM t;
