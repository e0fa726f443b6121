-- expect: environment variable SPATE_TEST_SURELY_UNSET used in an option is not set
CREATE TABLE t WITH (connector = 'single_file', path = '{{ SPATE_TEST_SURELY_UNSET }}/x.jsonl', format = 'json', type = 'source');
SELECT * FROM t;
