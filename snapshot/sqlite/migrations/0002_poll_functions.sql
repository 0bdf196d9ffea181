-- reconciler schema v2 on SQLite: nothing to do (the PostgreSQL store
-- gained its poll functions; SQLite polls by seq with inline SQL).
SELECT 1;
