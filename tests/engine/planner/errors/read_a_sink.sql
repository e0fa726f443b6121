-- expect: 3:15: table 'out' is a sink and cannot be read
CREATE TABLE out WITH (connector = 'blackhole');
SELECT * FROM out;
