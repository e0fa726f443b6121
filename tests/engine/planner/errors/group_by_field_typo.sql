-- expect: 4:43: no field 'auctoin' in 'bid' (did you mean 'auction'?)
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid.auction, count(*) AS n FROM nexmark
GROUP BY TUMBLE(INTERVAL '1' SECOND), bid.auctoin;
