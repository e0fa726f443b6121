-- expect: 4:85: table out: a sink cannot have generated columns: compute the value in the query that inserts into it
CREATE TABLE bids (auction BIGINT, price BIGINT)
WITH (connector = 'single_file', path = 'bids.jsonl', format = 'json', type = 'source');
CREATE TABLE out (auction BIGINT, price BIGINT, doubled BIGINT GENERATED ALWAYS AS (price * 2))
WITH (connector = 'single_file', path = 'out.jsonl', format = 'json', type = 'sink');
INSERT INTO out SELECT auction, price FROM bids;
