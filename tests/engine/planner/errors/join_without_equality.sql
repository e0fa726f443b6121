-- expect: 3:30: an updating join needs at least one equality between its sides
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT a.counter FROM t AS a JOIN t AS b ON a.counter < b.counter;
