package rheo

import (
	"crypto/md5"
	"encoding/binary"
)

// PartitionForKey returns the partition a key routes to among count
// partitions: the first four bytes of md5(key), read big-endian as an
// unsigned integer, modulo count. PostgreSQL computes the same with
// ('x' || substr(md5(key), 1, 8))::bit(32)::bigint % count.
func PartitionForKey(key string, count int) int {
	sum := md5.Sum([]byte(key))
	return int(uint64(binary.BigEndian.Uint32(sum[:4])) % uint64(count))
}
