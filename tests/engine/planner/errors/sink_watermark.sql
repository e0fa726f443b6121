-- expect: 4:49: table out: a sink cannot have a WATERMARK (event time and watermarks belong to sources): remove it
CREATE TABLE bids (auction BIGINT, ts TIMESTAMP)
WITH (connector = 'single_file', path = 'bids.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, ts TIMESTAMP, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'out.jsonl', format = 'json', type = 'sink');
INSERT INTO out SELECT auction, ts FROM bids;
