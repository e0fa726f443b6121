-- expect: 3:8: 'bid.price' is bigint: only an array, a map or a struct can be indexed
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid.price[1] AS p FROM nexmark;
