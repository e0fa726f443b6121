-- Bids per second over a bounded Nexmark stream, with the highest price seen.
-- Runs on the embedded default: local Spark, SQLite state, no services.
-- nexmark.base_time_ms fixes the event-time base (otherwise the start's wall
-- clock), so the ten one-second windows hold the same counts on every run.
CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '5000',
    runtime = '10',
    rate_limited = 'false',
    'nexmark.base_time_ms' = '1767225600000'
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
