-- expect: 3:18: 'bid.price' is bigint, not a struct: it has no field 'cents'
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid.price.cents FROM nexmark;
