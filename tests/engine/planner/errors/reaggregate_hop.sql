-- expect: 6:10: re-aggregating the output of a HOP window is not supported yet; re-aggregate TUMBLE output, or aggregate the source rows in the window directly
CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');
SELECT w, max(n) AS busiest
FROM (SELECT counter % 5 AS k, HOP(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w, count(*) AS n
      FROM t GROUP BY 1, 2)
GROUP BY w;
