-- expect: 2:50: unknown connector 'preview' (the engine attaches it to a bare SELECT; it cannot be declared); known connectors:
CREATE TABLE shown (id BIGINT) WITH (connector = 'preview');
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = 10);
INSERT INTO shown SELECT counter FROM ticks;
