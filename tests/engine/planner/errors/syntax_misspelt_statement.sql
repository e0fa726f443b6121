-- expect: 3:1: syntax error: a statement starts with CREATE, INSERT, SELECT, SET, WITH, not 'SELEC' (did you mean 'select'?)
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELEC counter FROM t;
