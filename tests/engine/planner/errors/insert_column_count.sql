-- expect: 6:1: INSERT INTO out: the query gives 1 column(s) (auction) but out declares 2 (auction, bids)
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, bids BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out
SELECT auction FROM bids;
