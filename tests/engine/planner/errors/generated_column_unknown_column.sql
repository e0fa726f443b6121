-- expect: 3:62: table events: unknown column 'sent_msec' in a generated column (did you mean 'sent_ms'?); its columns: id, sent_ms
CREATE TABLE events (id BIGINT, sent_ms BIGINT,
  sent_at TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(sent_msec)))
WITH (connector = 'single_file', path = 'events.jsonl', format = 'json', type = 'source');
SELECT id, sent_at FROM events;
