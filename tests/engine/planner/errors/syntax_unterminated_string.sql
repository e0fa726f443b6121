-- expect: 3:39: syntax error: unterminated string: add the closing '
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t WHERE counter = 'abc;
