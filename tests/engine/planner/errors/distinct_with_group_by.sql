-- expect: 3:8: SELECT DISTINCT cannot be combined with GROUP BY or aggregates
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT DISTINCT subtask_index, count(*) FROM t GROUP BY subtask_index;
