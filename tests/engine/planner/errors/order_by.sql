-- expect: 3:23: ORDER BY is not supported
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t ORDER BY counter;
