-- expect: 3:85: format 'parquet' is not supported yet; Spate reads and writes 'json', 'debezium_json', 'avro', 'protobuf', 'raw_string' and 'raw_bytes'
CREATE TABLE clicks (page TEXT)
WITH (connector = 'single_file', path = 'clicks.parquet', type = 'source', format = 'parquet');
SELECT page FROM clicks;
