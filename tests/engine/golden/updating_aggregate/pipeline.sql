-- case: updating (non-windowed) aggregates into debezium_json sinks, three lines per
-- epoch, a flush every epoch: per auction with HAVING (an auction reaching 4 bids is
-- deleted), SELECT DISTINCT and UNION (a GROUP BY of their columns) and a global
-- aggregate (one key); one bid has a NULL price.  Expected: after each epoch (a 3-line prefix of
-- bids.jsonl) DuckDB runs the same query in batch, and consecutive results are diffed
-- per key into c/u/d records.
-- update-flush-interval-ms: 0
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '3');
CREATE TABLE totals WITH (connector = 'single_file', path = '{{ OUT_DIR }}/totals.jsonl',
                          format = 'debezium_json', type = 'sink');
CREATE TABLE bidders WITH (connector = 'single_file', path = '{{ OUT_DIR }}/bidders.jsonl',
                           format = 'debezium_json', type = 'sink');
CREATE TABLE ids WITH (connector = 'single_file', path = '{{ OUT_DIR }}/ids.jsonl',
                       format = 'debezium_json', type = 'sink');
CREATE TABLE overall WITH (connector = 'single_file', path = '{{ OUT_DIR }}/overall.jsonl',
                           format = 'debezium_json', type = 'sink');
INSERT INTO totals
SELECT auction, count(*) AS bids, sum(price) AS total, max(price) AS top,
       count(DISTINCT bidder) AS bidders
FROM bids GROUP BY auction HAVING count(*) < 4;
INSERT INTO bidders SELECT DISTINCT bidder FROM bids WHERE price > 10;
INSERT INTO overall SELECT count(*) AS n, min(price) AS low FROM bids;
INSERT INTO ids SELECT auction AS id FROM bids WHERE price > 20 UNION SELECT bidder FROM bids WHERE price < 8;
