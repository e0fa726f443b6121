-- expect: 4:8: unknown column 'pricee' (did you mean 'price'?); available: auction, price, ts
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'data/in.jsonl', format = 'json', type = 'source');
SELECT pricee FROM bids;
