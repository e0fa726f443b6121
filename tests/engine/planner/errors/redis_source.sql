-- expect: 2:14: table cache: connector 'redis' needs option 'stream'
CREATE TABLE cache (k TEXT, v TEXT)
WITH (connector = 'redis', address = 'redis://localhost:6379', type = 'source', format = 'json');
SELECT v FROM cache;
