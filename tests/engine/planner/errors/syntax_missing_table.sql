-- expect: 3:21: syntax error: expected a table name after FROM, found the keyword WHERE
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM WHERE counter > 1;
