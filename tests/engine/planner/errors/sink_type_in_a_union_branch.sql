-- expect: 8:21: INSERT INTO out: column 2 is an array, which cannot be written to label date; write one element (tags[1])
CREATE TABLE bids (auction BIGINT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, label DATE) WITH (connector = 'stdout', format = 'json');
INSERT INTO out
SELECT auction, ts FROM bids
UNION ALL
SELECT auction + 1, tags FROM bids;
