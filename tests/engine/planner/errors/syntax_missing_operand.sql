-- expect: 3:39: syntax error: expected an expression after '>', found the end of the statement
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t WHERE counter > ;
