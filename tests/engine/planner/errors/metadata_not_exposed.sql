-- expect: 4:42: METADATA FROM 'partition' is not supported: connector 'single_file' exposes no metadata to a source
CREATE TABLE clicks (
  page TEXT,
  part INT GENERATED ALWAYS AS (metadata('partition')) STORED
) WITH (connector = 'single_file', path = 'clicks.jsonl', type = 'source', format = 'json');
SELECT page, part FROM clicks;
