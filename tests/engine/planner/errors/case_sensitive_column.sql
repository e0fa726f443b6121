-- expect: 2:28: case-sensitive column names ("eventType") are not supported yet: Spate folds names to lower case, so the column would not match its field
CREATE TABLE t (id BIGINT, "eventType" TEXT)
WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT id FROM t;
