-- expect: 2:39: option 'connection' (a saved connection, by name) is not supported yet: give table clicks WITH (connector = ..., ...) and its options
CREATE TABLE clicks (page TEXT) WITH (connection = 'my_stream', type = 'source');
SELECT page FROM clicks;
