-- expect: 3:39: updating (non-windowed) aggregates are not supported yet
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT subtask_index, count(*) FROM t GROUP BY subtask_index;
