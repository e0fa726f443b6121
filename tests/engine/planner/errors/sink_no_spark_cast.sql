-- expect: 5:33: INSERT INTO out: column 2 is bigint, which cannot be written to day date; Spark has no cast from bigint to date
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, day DATE) WITH (connector = 'stdout', format = 'json');
INSERT INTO out SELECT auction, price AS day FROM bids;
