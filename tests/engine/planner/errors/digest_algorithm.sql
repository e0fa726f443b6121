-- expect: 3:18: digest() algorithm 'blake2b' is not supported yet; use one of md5, sha1, sha224, sha256, sha384, sha512
CREATE TABLE t (s TEXT) WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT digest(s, 'blake2b') FROM t;
