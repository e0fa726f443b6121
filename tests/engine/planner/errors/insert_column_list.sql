-- expect: 5:13: INSERT INTO with a column list is not supported yet: the query's columns go to the table's declared columns by position; drop the list
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, price BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out (price, auction) SELECT price, auction FROM bids;
