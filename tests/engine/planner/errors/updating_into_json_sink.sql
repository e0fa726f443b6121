-- expect: 4:13: sink 'counts' has format 'json', which can only append; use format = 'debezium_json'
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE counts WITH (connector = 'stdout', format = 'json');
INSERT INTO counts SELECT subtask_index, count(*) FROM t GROUP BY subtask_index;
