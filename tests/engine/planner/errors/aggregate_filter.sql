-- expect: 3:17: an aggregate's FILTER (WHERE ...) is not supported yet; use CASE WHEN inside the aggregate
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT count(*) FILTER (WHERE counter > 5) AS late FROM t GROUP BY TUMBLE(INTERVAL '1' SECOND);
