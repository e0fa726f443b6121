-- case: a debezium_json source (r/c/u/d changes keyed by its PRIMARY KEY, three per
-- epoch, a flush every epoch) feeding an updating aggregate per region (an account
-- moving region is withdrawn from one and added to the other; in the third epoch
-- account 5 is created and deleted, so region 'ap' shows nothing) and a filter
-- passing changes through to a debezium_json sink.  Expected: the table after each
-- epoch's changes, queried in batch by DuckDB, consecutive results diffed per key
-- into c/u/d records.
-- update-flush-interval-ms: 0
CREATE TABLE accounts (id BIGINT PRIMARY KEY, region TEXT, balance BIGINT)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/accounts.jsonl',
      format = 'debezium_json', type = 'source', max_lines_per_batch = '3');
CREATE TABLE regions WITH (connector = 'single_file', path = '{{ OUT_DIR }}/regions.jsonl',
                           format = 'debezium_json', type = 'sink');
CREATE TABLE positive WITH (connector = 'single_file', path = '{{ OUT_DIR }}/positive.jsonl',
                            format = 'debezium_json', type = 'sink');
INSERT INTO regions
SELECT region, count(*) AS accounts, sum(balance) AS total, min(balance) AS low,
       max(balance) AS high
FROM accounts GROUP BY region;
INSERT INTO positive SELECT id, region, balance FROM accounts WHERE balance > 0;
