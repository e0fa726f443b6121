-- expect: 2:5: unknown SET variable 'parallelism'
SET parallelism = 4;
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t;
