-- expect: 3:26: no field 'prize' in 'bid' (did you mean 'price'?)
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT count(*), max(bid.prize) FROM nexmark WHERE bid IS NOT NULL
GROUP BY TUMBLE(INTERVAL '1' SECOND);
