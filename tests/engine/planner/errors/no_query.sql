-- expect: the pipeline has no query
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
