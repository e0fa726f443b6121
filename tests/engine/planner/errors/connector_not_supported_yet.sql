-- expect: 3:19: connector 'fluvio' is not supported yet; Spate's connectors: blackhole, delta, filesystem, iceberg, impulse, kafka, kinesis, mqtt, nats, nexmark, polling_http, postgres, rabbitmq, redis, single_file, sse, stdout, webhook, websocket
CREATE TABLE clicks (page TEXT)
WITH (connector = 'fluvio', topic = 'clicks', format = 'json');
SELECT page FROM clicks;
