-- expect: 4:25: unknown column 'b.aucton' (did you mean 'b.auction'?)
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'data/in.jsonl', format = 'json', type = 'source');
SELECT b.price, count(b.aucton) AS n FROM bids AS b GROUP BY b.price;
