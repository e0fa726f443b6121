-- case: scalar functions (string, JSON, regex, math, hash, time, conditional) run as native
-- Spark expressions, both in a stateless query and inside a windowed aggregate's input and
-- output. Expected rows worked out by hand from events.jsonl (round() is half-up on the
-- decimal value: 112.345 -> 112.35); md5 values from Python's hashlib.
-- The last row's payload is not JSON: every JSON function yields NULL (or FALSE for ?).
CREATE TABLE events (who TEXT, payload JSON, amount DOUBLE, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/events.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl',
                       format = 'json', type = 'sink');
CREATE TABLE by_country WITH (connector = 'single_file', path = '{{ OUT_DIR }}/by_country.jsonl',
                              format = 'json', type = 'sink');
INSERT INTO out
SELECT initcap(trim(who)) AS name, json_get_str(payload, 'country') AS country,
       json_length(payload, 'items') AS n_items,
       json_get_int(payload, 'items', 0, 'qty') AS first_qty,
       coalesce(json_get_bool(payload, 'vip'), false) AS vip, payload ? 'vip' AS has_vip,
       regexp_replace(extract_json_string(payload, '$.items[0].sku'), '-', '') AS sku,
       round(abs(amount), 1) AS amount, md5(lower(trim(who))) AS who_hash,
       date_bin(INTERVAL '10' SECOND, ts) AS bucket
FROM events;
INSERT INTO by_country
SELECT lower(coalesce(country, 'none')) AS country, w.start AS window_start, n,
       round(total, 2) AS total
FROM (SELECT json_get_str(payload, 'country') AS country, TUMBLE(INTERVAL '20' SECOND) AS w,
             count(*) AS n, sum(greatest(amount, 0)) AS total
      FROM events GROUP BY 1, 2);
