-- expect: 3:19: connector 'fluvio' is not supported yet; Spate's connectors:
CREATE TABLE clicks (page TEXT)
WITH (connector = 'fluvio', topic = 'clicks', format = 'json');
SELECT page FROM clicks;
