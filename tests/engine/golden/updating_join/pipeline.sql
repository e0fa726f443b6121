-- case: updating (non-windowed) joins, one line per source and epoch, into
-- debezium_json sinks.  Worked by hand, epoch by epoch:
--   epoch 0: order 1 (customer 1), customer 2 arrive: nothing matches.
--            INNER: nothing.  LEFT: c (1, NULL).  FULL: c (1, NULL), c (NULL, bo).
--   epoch 1: order 2 (customer 2) matches the stored customer 2; customer 1
--            matches the stored order 1.
--            INNER: c (2, bo), c (1, al).  LEFT: the same, and d (1, NULL).
--            FULL: the same as LEFT, and d (NULL, bo).
--   epoch 2: order 3 (customer 1) matches customer 1; customer 3 matches nothing.
--            INNER and LEFT: c (3, al).  FULL: c (3, al), c (NULL, cy).
-- A retraction and an addition with different row keys stay a d and a c.
CREATE TABLE orders (id BIGINT, customer BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/orders.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1');
CREATE TABLE customers (cid BIGINT, name TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/customers.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1');
CREATE TABLE inner_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/inner.jsonl',
                             format = 'debezium_json', type = 'sink');
CREATE TABLE left_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/left.jsonl',
                            format = 'debezium_json', type = 'sink');
CREATE TABLE full_out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/full.jsonl',
                            format = 'debezium_json', type = 'sink');
INSERT INTO inner_out SELECT o.id, c.name FROM orders AS o JOIN customers AS c
ON o.customer = c.cid;
INSERT INTO left_out SELECT o.id, c.name FROM orders AS o LEFT JOIN customers AS c
ON o.customer = c.cid;
INSERT INTO full_out SELECT o.id, c.name FROM orders AS o FULL OUTER JOIN customers AS c
ON o.customer = c.cid;
