-- expect: 5:13: unknown table 'totls' (did you mean 'totals'?)
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'data/in.jsonl', format = 'json', type = 'source');
CREATE TABLE totals (auction BIGINT) WITH (connector = 'blackhole');
INSERT INTO totls SELECT auction FROM bids;
