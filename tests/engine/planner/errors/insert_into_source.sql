-- expect: 3:13: cannot INSERT INTO 't': it is a source
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
INSERT INTO t SELECT counter, subtask_index FROM t;
