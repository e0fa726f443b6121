-- expect: 3:8: avg(DISTINCT ...) is not supported yet; of the aggregates only count takes DISTINCT
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT avg(DISTINCT counter) AS a FROM t GROUP BY TUMBLE(INTERVAL '1' SECOND);
