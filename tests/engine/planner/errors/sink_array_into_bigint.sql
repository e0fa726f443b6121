-- expect: 6:17: INSERT INTO out: column 2 is an array, which cannot be written to prices bigint; write one element (ARRAY_AGG(price)[1]), UNNEST(ARRAY_AGG(price)), or declare the column as array<bigint>
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, prices BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out
SELECT auction, array_agg(price) FROM bids GROUP BY auction, TUMBLE(INTERVAL '1' MINUTE);
