-- expect: 3:33: syntax error: unexpected 'subtask_index' after 'doubled' (is a comma, an operator or a keyword missing before it?)
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter * 2 AS doubled   subtask_index FROM t;
