-- expect: 4:1: syntax error: expected ')' to close the '(' at line 3, column 13, found the keyword FROM
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT lower(concat('n', CAST(counter AS TEXT))
FROM t;
