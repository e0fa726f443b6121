-- expect: 3:71: a redis source is not supported yet: connector 'redis' serves lookup tables, declared with CREATE TEMPORARY TABLE cache (...)
CREATE TABLE cache (k TEXT, v TEXT)
WITH (connector = 'redis', address = 'redis://localhost:6379', type = 'source', format = 'json');
SELECT v FROM cache;
