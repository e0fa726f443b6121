-- expect: 4:35: scalar subqueries are not supported yet
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT * FROM bids WHERE price > (SELECT max(price) FROM bids);
