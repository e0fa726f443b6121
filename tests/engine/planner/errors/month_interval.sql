-- expect: 3:18: months or years
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT count(*), TUMBLE(INTERVAL '1' MONTH) AS w FROM t GROUP BY w;
