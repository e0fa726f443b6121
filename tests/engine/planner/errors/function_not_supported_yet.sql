-- expect: 3:17: function 'arrow_typeof' is not supported yet (Spark types are not Arrow's)
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter, arrow_typeof(counter) FROM t;
