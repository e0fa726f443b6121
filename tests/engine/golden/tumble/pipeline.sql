-- case: TUMBLE(10s) per auction with every supported aggregate, three lines per epoch;
-- one bid has a NULL price (counted by count(*), ignored by sum/min/max/avg)
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '3');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT auction, w.start AS window_start, w.end AS window_end, bids, total, low, high, mean,
       bidders
FROM (SELECT auction, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS bids, sum(price) AS total,
             min(price) AS low, max(price) AS high, avg(price) AS mean,
             count(DISTINCT bidder) AS bidders
      FROM bids GROUP BY auction, w);
