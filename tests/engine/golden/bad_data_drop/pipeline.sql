-- case: bad_data = 'drop' skips undecodable lines (and counts them), two lines per epoch
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL)
WITH (connector = 'single_file', path = '{{ GOLDEN_DIR }}/bids.jsonl', format = 'json',
      type = 'source', bad_data = 'drop', max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/out.jsonl', format = 'json', type = 'sink');
INSERT INTO out SELECT auction, price FROM bids;
