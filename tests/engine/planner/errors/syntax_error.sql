-- expect: 3:22: syntax error
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t WHERE (;
