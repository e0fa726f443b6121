-- expect: 5:34: INSERT INTO out: column 2 is an array, which cannot be written to bids bigint
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, bids BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out SELECT auction, [price, price] FROM bids;
