-- expect: 2:76: a debezium_json source cannot have generated columns
CREATE TABLE s (id BIGINT PRIMARY KEY, v TEXT, w TEXT GENERATED ALWAYS AS (upper(v)))
WITH (connector = 'single_file', path = 'changes.jsonl', format = 'debezium_json',
      type = 'source');
SELECT id FROM s;
