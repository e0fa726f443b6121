-- expect: 2:29: updating_ttl: intervals cannot use months or years
SET updating_ttl = INTERVAL '1' MONTH;
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT counter FROM t;
