-- expect: 4:20: unknown table 'bid' (did you mean 'bids'?)
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'data/in.jsonl', format = 'json', type = 'source');
SELECT price FROM  bid;
