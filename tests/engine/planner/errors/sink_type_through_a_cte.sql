-- expect: 5:8: INSERT INTO out: column 1 is a struct, which cannot be written to seller bigint; write one of its fields (s.seller.id) or declare the column as a struct
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
CREATE TABLE out (seller BIGINT) WITH (connector = 'stdout', format = 'json');
INSERT INTO out WITH sellers AS (SELECT person AS seller FROM nexmark WHERE person IS NOT NULL)
SELECT s.seller FROM sellers AS s;
