-- expect: 3:10: table functions in FROM are not supported yet; read a table, a view or a subquery
CREATE TABLE visits (page TEXT) WITH (connector = 'single_file', path = 'v.jsonl', format = 'json', type = 'source');
SELECT * FROM generate_series(1, 10);
