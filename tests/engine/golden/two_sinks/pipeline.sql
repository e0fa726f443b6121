-- case: one source read once, two INSERT INTO: a stateless filter and a windowed count
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE expensive WITH (connector = 'single_file', path = '{{ OUT_DIR }}/expensive.jsonl', format = 'json', type = 'sink');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl', format = 'json', type = 'sink');
INSERT INTO expensive SELECT auction, price * 2 AS double_price FROM bids WHERE price >= 26;
INSERT INTO counts SELECT w.end AS window_end, n
FROM (SELECT TUMBLE(INTERVAL '20' SECOND) AS w, count(*) AS n FROM bids GROUP BY w);
