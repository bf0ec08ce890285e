-- Schema version 18: the precision of a story's span bounds, beside the instants.
--
-- `started_at` and `ended_at` are instants. A bound written as a bare date (GoodBuddy's event dates) was kept as
-- that UTC day's midnight alone, so a story whose first event is dated 2026-04-01 showed `startedAt`
-- 2026-04-01T00:00:00Z, a midnight, where an experience's event shows `at` with `atEnd` and `atPrecision` `day`.
-- Each bound now has its precision as an event time has one (open text, `day` for a bare date: the bound is that
-- whole UTC day, the instant its midnight); NULL: as precise as the instant, or not recorded. Upgrading leaves every
-- stored story's precisions NULL (not recorded): a re-import or sync of its source fills them.

ALTER TABLE stories ADD COLUMN started_at_precision TEXT;
ALTER TABLE stories ADD COLUMN ended_at_precision TEXT;

PRAGMA user_version = 18;
