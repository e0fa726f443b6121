-- expect: 3:26: syntax error: the SELECT list ends with a comma before FROM; remove it
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT auction.id, person,
FROM nexmark;
