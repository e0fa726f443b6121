-- expect: 4:1: syntax error: expected END to close the CASE at line 3, column 17, found the keyword FROM
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter, CASE WHEN counter > 1 THEN 'many' ELSE 'one'
FROM t;
