-- expect: 3:23: ordering inside an aggregate (last_value(x ORDER BY y)) is not supported yet
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT subtask_index, last_value(counter ORDER BY counter) FROM t GROUP BY 1;
