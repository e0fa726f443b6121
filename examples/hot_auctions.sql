-- Bid counts per auction over a sliding one-minute window, every 10 seconds,
-- written as JSON lines to out/hot_auctions.jsonl.
CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '1000',
    runtime = '120',
    rate_limited = 'false'
);

CREATE TABLE hot_auctions WITH (
    connector = 'single_file',
    path = 'out/hot_auctions.jsonl',
    format = 'json',
    type = 'sink'
);

INSERT INTO hot_auctions
SELECT auction, w.end AS window_end, bids
FROM (
    SELECT bid.auction AS auction,
           HOP(INTERVAL '10' SECOND, INTERVAL '1' MINUTE) AS w,
           count(*) AS bids
    FROM nexmark
    WHERE bid IS NOT NULL
    GROUP BY 1, 2
)
WHERE bids >= 5;
