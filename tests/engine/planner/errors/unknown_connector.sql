-- expect: 2:34: unknown connector 'kafkaa'
CREATE TABLE t WITH (connector = 'kafkaa', topic = 'x');
SELECT * FROM t;
