-- case: JSON operators and functions, function aliases, UNNEST inside a view, and a
-- debezium_json source whose fields arrive with other JSON types than declared.
-- Worked by hand:
--   -> returns the value as JSON text (a string quoted, a JSON null as null), ->> as
--   text; a path into a missing key, or into text that is not JSON, gives the text
--   null through -> and json_get (as the dialect writes its JSON value) and NULL
--   through ->>.
--   character_length and char_length are length.
--   The view unnests tags: a row per element, none for the empty array; 'x' filtered.
--   prices: a number declared TEXT is written as its JSON text, numeric text declared
--   BIGINT or DOUBLE is parsed, "false" declared BOOLEAN is a boolean; the changes
--   pass through a filter into a debezium_json sink unchanged.
-- update-flush-interval-ms: 0
CREATE TABLE events (id BIGINT, payload TEXT, tags TEXT[], ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/events.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE prices (id BIGINT PRIMARY KEY, price TEXT, qty BIGINT, ok BOOLEAN)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/prices.jsonl',
      format = 'debezium_json', type = 'source', max_lines_per_batch = '2');
CREATE TABLE json_out (id BIGINT, kind_json TEXT, kind_text TEXT, gone TEXT, n TEXT,
                       zone TEXT, second TEXT, kind_length INT, zone_length INT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/json.jsonl', format = 'json',
      type = 'sink');
CREATE TABLE tag_out (id BIGINT, tag TEXT)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/tags.jsonl', format = 'json',
      type = 'sink');
CREATE TABLE price_out (id BIGINT PRIMARY KEY, price TEXT, qty BIGINT, ok BOOLEAN)
WITH (connector = 'single_file', path = '{{ OUT_DIR }}/prices.jsonl',
      format = 'debezium_json', type = 'sink');
CREATE VIEW tag_rows AS SELECT id, UNNEST(tags) AS tag FROM events;
INSERT INTO json_out
SELECT id, payload -> 'kind', payload ->> 'kind', payload -> 'gone', json_get(payload, 'n'),
       payload -> 'at' ->> 'zone', json_get(payload, 'list', 1),
       character_length(payload ->> 'kind'), char_length(payload -> 'at' ->> 'zone')
FROM events;
INSERT INTO tag_out SELECT id, tag FROM tag_rows WHERE tag <> 'x';
INSERT INTO price_out SELECT id, price, qty, ok FROM prices WHERE qty > 0;
