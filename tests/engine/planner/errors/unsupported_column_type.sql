-- expect: 4:14: unsupported column type MAP<TEXT, TEXT>
CREATE TABLE sessions (
  id TEXT,
  attributes MAP<TEXT, TEXT>
) WITH (connector = 'single_file', path = 'sessions.jsonl', format = 'json', type = 'source');
SELECT id FROM sessions;
