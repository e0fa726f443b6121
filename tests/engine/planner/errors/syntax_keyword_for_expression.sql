-- expect: 3:29: syntax error: expected an expression after WHERE, found the keyword AND
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t WHERE AND counter > 1;
