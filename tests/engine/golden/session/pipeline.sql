-- case: SESSION(5s) per bidder: rows closer than 5 s share a session
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out
SELECT bidder, s.start AS session_start, s.end AS session_end, count(*) AS bids, sum(price) AS spent
FROM bids GROUP BY bidder, SESSION(INTERVAL '5' SECOND) AS s;
