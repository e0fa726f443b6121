-- expect: 4:1: syntax error: GROUP BY needs at least one expression
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT count(*) FROM nexmark
GROUP BY;
