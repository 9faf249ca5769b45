-- Per group and partition progress, for psql dashboards (as of now()).
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
 CROSS JOIN LATERAL (SELECT rheo._frontier(g.group_id, c."partition", c.next_sequence) AS frontier) AS f;
