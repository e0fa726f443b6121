-- expect: 3:29: syntax error
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t WHERE (;
