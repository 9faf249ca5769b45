-- Per group and partition progress, for psql dashboards (as of now()).
--
-- The frontier is written out here, as lag writes it: everything below
-- the lowest non-terminal delivery is terminal, and with no delivery in
-- progress everything below the cursor is. The deliveries and dead
-- letters are read in lateral subqueries that name the stream of the
-- group, so that Citus runs the view on each node for its own streams.
CREATE OR REPLACE VIEW rheo.group_status AS
SELECT g.stream,
       g.group_name,
       c."partition",
       f.frontier,
       pt.high_watermark,
       greatest(0, pt.high_watermark - f.frontier) AS lag,
       f.inflight,
       x.dead_letters
  FROM rheo.groups g
  JOIN rheo.cursors c ON c.stream = g.stream AND c.group_id = g.group_id
  JOIN rheo.partitions pt ON pt.stream = g.stream AND pt."partition" = c."partition"
 CROSS JOIN LATERAL (SELECT coalesce(min(d.sequence), c.next_sequence) - 1 AS frontier,
                            count(*) FILTER (WHERE d.state = 'leased' AND d.expires_at > now()) AS inflight
                       FROM rheo.deliveries d
                      WHERE d.stream = g.stream AND d.group_id = g.group_id
                        AND d."partition" = c."partition") AS f
 CROSS JOIN LATERAL (SELECT count(*) AS dead_letters FROM rheo.dead_letters dl
                      WHERE dl.stream = g.stream AND dl.group_id = g.group_id
                        AND dl."partition" = c."partition") AS x;

SELECT rheo._access('ALL', 'TABLE rheo.group_status');
SELECT rheo._access('SELECT', 'TABLE rheo.group_status', 'rheo_reader');
