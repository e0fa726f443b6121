-- expect: 3:8: 'bid' is a struct: name its field (bid.auction or bid['auction']), not a position
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid[2] AS second FROM nexmark;
