-- expect: 4:12: table bids: file no/such/input.jsonl does not exist
-- plan: inputs
CREATE TABLE bids (auction BIGINT, price BIGINT) WITH (connector = 'single_file',
    path = 'no/such/input.jsonl', format = 'json', type = 'source');
SELECT auction FROM bids;
