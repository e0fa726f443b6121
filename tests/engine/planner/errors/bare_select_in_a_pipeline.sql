-- expect: 4:1: this SELECT has no sink: a pipeline that runs writes its rows with INSERT INTO <sink> SELECT
-- plan: pipeline
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '10');
SELECT bid.price FROM nexmark;
