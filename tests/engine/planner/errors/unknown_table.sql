-- expect: 2:15: unknown table 'nothere'
SELECT 1 FROM nothere;
