-- Per group and partition progress, for psql dashboards (as of now()).
--
-- A view reads its tables with its owner's privileges but calls functions
-- with the caller's, so the frontier is written out here rather than
-- taken from rheo._frontier, which rheo_reader may not execute.
CREATE OR REPLACE VIEW rheo.group_status AS
SELECT g.stream,
       g.group_name,
       c."partition",
       f.frontier,
       pt.high_watermark,
       greatest(0, pt.high_watermark - f.frontier) AS lag,
       (SELECT count(*) FROM rheo.deliveries d
         WHERE d.group_id = g.group_id AND d."partition" = c."partition"
           AND d.state = 'leased' AND d.expires_at > now()) AS inflight,
       (SELECT count(*) FROM rheo.dead_letters dl
         WHERE dl.group_id = g.group_id AND dl."partition" = c."partition") AS dead_letters
  FROM rheo.groups g
  JOIN rheo.cursors c ON c.group_id = g.group_id
  JOIN rheo.partitions pt ON pt.stream = g.stream AND pt."partition" = c."partition"
 CROSS JOIN LATERAL (SELECT coalesce((SELECT d.sequence FROM rheo.deliveries d
                                       WHERE d.group_id = g.group_id AND d."partition" = c."partition"
                                       ORDER BY d.sequence LIMIT 1),
                                     c.next_sequence) - 1 AS frontier) AS f;

SELECT rheo._access('ALL', 'TABLE rheo.group_status');
SELECT rheo._access('SELECT', 'TABLE rheo.group_status', 'rheo_reader');
