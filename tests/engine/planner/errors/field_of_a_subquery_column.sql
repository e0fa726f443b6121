-- expect: 3:10: no field 'strat' in 'w' (did you mean 'start'?)
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT w.strat, n FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM nexmark
GROUP BY w);
