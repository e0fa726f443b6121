-- expect: 2:64: colour
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10', colour = 'blue');
SELECT * FROM t;
