-- expect: 4:7: table events: unknown option 'json.unstructred' for single_file source 'events'; remove it
CREATE TABLE events (value TEXT)
WITH (connector = 'single_file', path = 'events.jsonl', format = 'json', type = 'source',
      json.unstructred = true);
SELECT value FROM events;
