-- case: updating aggregates over an updating aggregate, three lines per epoch, a flush
-- every epoch: the retractions of the inner count flow through a filter (bids >= 2)
-- and a second GROUP BY (a histogram of bid counts); a global min/max over the inner
-- sums keeps multisets, so a withdrawn extreme is replaced by the next one.
-- Expected: after each epoch (a 3-line prefix of bids.jsonl) DuckDB runs the same
-- nested query in batch, and consecutive results are diffed per key into c/u/d records.
-- update-flush-interval-ms: 0
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '3');
CREATE TABLE histogram WITH (connector = 'single_file', path = '{{ OUT_DIR }}/histogram.jsonl',
                             format = 'debezium_json', type = 'sink');
CREATE TABLE spread WITH (connector = 'single_file', path = '{{ OUT_DIR }}/spread.jsonl',
                          format = 'debezium_json', type = 'sink');
INSERT INTO histogram
SELECT bids, count(*) AS auctions
FROM (SELECT auction, count(*) AS bids FROM bids GROUP BY auction)
WHERE bids >= 2 GROUP BY bids;
INSERT INTO spread
SELECT count(*) AS auctions, min(total) AS smallest, max(total) AS largest
FROM (SELECT auction, sum(price) AS total FROM bids GROUP BY auction);
