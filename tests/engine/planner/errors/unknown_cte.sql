-- expect: 6:16: unknown table 'cheep' (did you mean 'cheap'?)
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = 'data/in.jsonl', format = 'json', type = 'source');
WITH cheap AS (SELECT auction, price FROM bids WHERE price < 10),
     dear AS (SELECT auction, price FROM bids WHERE price > 100)
SELECT * FROM  cheep;
