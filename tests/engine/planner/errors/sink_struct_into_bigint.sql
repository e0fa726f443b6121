-- expect: 4:37: INSERT INTO out: column 2 is a struct, which cannot be written to price bigint; write one of its fields (bid.auction)
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
CREATE TABLE out (auction BIGINT, price BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out SELECT bid.auction, bid FROM nexmark WHERE bid IS NOT NULL;
