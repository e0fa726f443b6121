-- expect: 5:33: INSERT INTO out: column 2 is the text 'abc', which is not an integer: written to n bigint it would be NULL
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, n BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out SELECT auction, 'abc' FROM bids;
