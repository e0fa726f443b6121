-- expect: 3:24: to_timestamp(): format specifier %G is not supported yet (supported: %Y %y %m %b %h %B %d %e %a %A %j %H %k %I %l %p %P %M %S %f %Z %z %T %X %R %D %x %F %r %c %+ %.f %-d ...)
CREATE TABLE t (s TEXT) WITH (connector = 'single_file', path = 't.jsonl', format = 'json', type = 'source');
SELECT to_timestamp(s, '%G-W%V') FROM t;
