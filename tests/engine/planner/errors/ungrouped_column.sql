-- expect: 3:8: column 'counter' must appear in GROUP BY
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter, count(*) AS c, TUMBLE(INTERVAL '1' SECOND) AS w FROM t GROUP BY w;
