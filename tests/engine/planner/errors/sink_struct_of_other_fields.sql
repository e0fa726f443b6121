-- expect: 6:24: INSERT INTO out: column 1 is struct<a:bigint,b:string>, which cannot be written to info struct<a:bigint>: a struct is written field by field, in order
CREATE TABLE a (info STRUCT<a BIGINT, b TEXT>, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (info STRUCT<a BIGINT>)
WITH (connector = 'single_file', path = 'out.jsonl', format = 'json', type = 'sink');
INSERT INTO out SELECT info FROM a;
