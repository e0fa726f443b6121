-- expect: 4:35: EXISTS (SELECT ...) is not supported yet: in a streaming query the subquery's rows keep changing as its input arrives, so it is a join; join the subquery's table on its condition instead
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT price FROM bids AS b WHERE EXISTS (SELECT 1 FROM bids AS c WHERE c.auction = b.auction);
