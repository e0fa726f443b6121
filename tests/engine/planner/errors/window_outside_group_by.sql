-- expect: 3:17: TUMBLE may only appear in GROUP BY
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter, TUMBLE(INTERVAL '1' SECOND) AS w FROM t;
