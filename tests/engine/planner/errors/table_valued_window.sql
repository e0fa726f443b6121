-- expect: 3:28: the table-valued form of HOP (FROM HOP(table, column, ...)) is not supported yet; window in GROUP BY instead: SELECT ... FROM table GROUP BY HOP(...)
CREATE TABLE visits (page TEXT, at TIMESTAMP) WITH (connector = 'single_file', path = 'v.jsonl', format = 'json', type = 'source');
SELECT page, count(*) FROM HOP(visits, at, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) GROUP BY page;
