-- Bids per second over a bounded Nexmark stream, with the highest price seen.
-- Runs on the embedded default: local Spark, SQLite state, no services.
CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '5000',
    runtime = '10',
    rate_limited = 'false'
);

CREATE TABLE per_second WITH (
    connector = 'stdout',
    format = 'json'
);

INSERT INTO per_second
SELECT w.start AS second, bids, top_price
FROM (
    SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS bids, max(bid.price) AS top_price
    FROM nexmark
    WHERE bid IS NOT NULL
    GROUP BY w
);
