-- expect: 4:7: table clicks: option 'json.confluent_schema_registry' is not supported yet (by single_file source 'clicks'); remove it
CREATE TABLE clicks (page TEXT)
WITH (connector = 'single_file', path = 'clicks.jsonl', type = 'source', format = 'json',
      'json.confluent_schema_registry' = 'true');
SELECT page FROM clicks;
