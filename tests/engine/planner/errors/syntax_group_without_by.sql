-- expect: 3:29: syntax error: expected BY after GROUP, found 'counter'
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t GROUP counter;
