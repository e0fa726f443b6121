-- expect: 3:12: no field 'prize' in 'bid' (did you mean 'price'?)
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid['prize'] AS price FROM nexmark WHERE bid IS NOT NULL;
