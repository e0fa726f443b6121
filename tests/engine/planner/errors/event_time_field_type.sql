-- expect: 4:26: event_time_field column 'sent_ms' must be a TIMESTAMP (it is bigint): use a generated TIMESTAMP column computed from it
CREATE TABLE events (id BIGINT, sent_ms BIGINT)
WITH (connector = 'single_file', path = 'events.jsonl', format = 'json', type = 'source',
      event_time_field = 'sent_ms');
SELECT id FROM events;
