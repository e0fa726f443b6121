-- expect: 3:8: syntax error: the SELECT list is empty: name at least one column or expression (or *) before FROM
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT FROM t;
