-- case: HOP(5s slide, 15s width) per auction, two lines per epoch; each row counts in
-- three windows
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT auction, w.end AS window_end, n, high
FROM (SELECT auction, HOP(INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS w, count(*) AS n,
             max(price) AS high
      FROM bids GROUP BY 1, 2);
