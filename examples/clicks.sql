-- Clicks per page over ten-second windows, from a synthetic click stream.
-- A service pipeline: it runs until it is stopped. Create it on a server with
--   spate pipelines create clicks examples/clicks.sql
-- Its output lands in out/clicks_per_page.jsonl under the tenant's storage root.
CREATE TABLE clicks WITH (
    connector = 'impulse',
    event_rate = '20'
);

CREATE TABLE clicks_per_page WITH (
    connector = 'single_file',
    path = 'out/clicks_per_page.jsonl',
    format = 'json',
    type = 'sink'
);

INSERT INTO clicks_per_page
SELECT page, w.start AS window_start, w.end AS window_end, clicks
FROM (
    SELECT concat('/page/', CAST(counter % 5 AS TEXT)) AS page,
           TUMBLE(INTERVAL '10' SECOND) AS w,
           count(*) AS clicks
    FROM clicks
    GROUP BY 1, 2
);
