-- expect: 3:19: connector 'kinesis' is not supported yet; Spate's connectors: blackhole, impulse, nexmark, postgres, redis, single_file, stdout
CREATE TABLE clicks (page TEXT)
WITH (connector = 'kinesis', stream_name = 'clicks', format = 'json');
SELECT page FROM clicks;
