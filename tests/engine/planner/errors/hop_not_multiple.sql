-- expect: 3:18: HOP width must be an exact multiple of its slide
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT count(*), HOP(INTERVAL '3' SECOND, INTERVAL '10' SECOND) AS w FROM t GROUP BY w;
