-- expect: 4:7: table events: option 'watermark_field' conflicts with WATERMARK FOR at, which sets both event time and watermark: remove the option
CREATE TABLE events (id BIGINT, at TIMESTAMP, seen TIMESTAMP, WATERMARK FOR at)
WITH (connector = 'single_file', path = 'events.jsonl', format = 'json', type = 'source',
      watermark_field = 'seen');
SELECT id FROM events;
