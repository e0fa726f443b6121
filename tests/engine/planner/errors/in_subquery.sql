-- expect: 4:30: IN (SELECT ...) is not supported yet: in a streaming query the subquery's rows keep changing as its input arrives, so it is a join; join the subquery's rows on the value instead
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT price FROM bids WHERE auction IN (SELECT auction FROM bids WHERE price > 100);
