package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// routingKeys is the routing check's number of keys: enough that every node of a 3-node ring
// (16 vnodes each) owns some.
const routingKeys = 100

// checkRouting: with a cluster of expected nodes, in a keyspace of RF 1, every INSERT and SELECT
// of a key (gocql prepares them), sent through the session's token-aware host selection policy,
// goes to the key's one replica, and only there (one attempt); every node owns some keys; and
// the key's replica, asked directly at ONE, returns the row. Prints the requests per node.
//
// gocql keeps its replica map and a query's routing key private (GetRoutingKey is only on the
// statement a HostSelectionPolicy is handed), so the replica is computed here from what the
// driver does expose: the tokens of each host in Session.GetHosts (read from system.local and
// system.peers) and Cassandra's Murmur3 of the key's routing key, which for a single int
// partition key is its 4-byte big-endian serialization. With SimpleStrategy RF 1 the replica is
// the owner of the first ring token at or after the key's token.
func checkRouting(session *gocql.Session, keyspace string, expected int) error {
	table := keyspace + ".kv"
	if err := session.Query("CREATE KEYSPACE " + keyspace +
		" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		return fmt.Errorf("create the routing keyspace: %w", err)
	}
	if err := session.Query("CREATE TABLE " + table + " (k int PRIMARY KEY, v text)").Exec(); err != nil {
		return fmt.Errorf("create the routing table: %w", err)
	}
	// The token-aware policy reads the keyspace's replication from the schema metadata.
	if _, err := waitForTableMetadata(session, keyspace, "kv"); err != nil {
		return err
	}
	ring, err := newRing(session.GetHosts())
	if err != nil {
		return err
	}

	insert := "INSERT INTO " + table + " (k, v) VALUES (?, ?)"
	selectV := "SELECT v FROM " + table + " WHERE k = ?"
	replicaOf := func(k int) *gocql.HostInfo {
		return ring.owner(murmur3Token(binary.BigEndian.AppendUint32(nil, uint32(int32(k)))))
	}
	// Every host tried counts: Attempts() > 1 means a retry, maybe elsewhere.
	sentTo := func(iter *gocql.Iter, replica *gocql.HostInfo, what string) (string, error) {
		host := iter.Host()
		if host == nil || host.HostID() != replica.HostID() || iter.Attempts() != 1 {
			at := "no host"
			if host != nil {
				at = host.ConnectAddressAndPort()
			}
			return "", fmt.Errorf("%s went to %s in %d attempts, the key's replica is %s",
				what, at, iter.Attempts(), replica.ConnectAddressAndPort())
		}
		return host.ConnectAddressAndPort(), nil
	}
	readV := func(iter *gocql.Iter, what string) ([]string, error) {
		var values []string
		var v string
		for iter.Scan(&v) {
			values = append(values, v)
		}
		if err := iter.Close(); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return values, nil
	}

	owned, writes, reads, direct := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for k := 0; k < routingKeys; k++ {
		replica := replicaOf(k)
		owned[replica.ConnectAddressAndPort()]++
		iter := session.Query(insert, k, fmt.Sprintf("r%d", k)).Iter()
		if err := iter.Close(); err != nil {
			return fmt.Errorf("insert key %d: %w", k, err)
		}
		at, err := sentTo(iter, replica, fmt.Sprintf("INSERT of key %d", k))
		if err != nil {
			return err
		}
		writes[at]++
	}
	for k := 0; k < routingKeys; k++ {
		want := []string{fmt.Sprintf("r%d", k)}
		replica := replicaOf(k)
		iter := session.Query(selectV, k).Iter()
		what := fmt.Sprintf("SELECT of key %d", k)
		values, err := readV(iter, what)
		if err != nil {
			return err
		}
		at, err := sentTo(iter, replica, what)
		if err != nil {
			return err
		}
		reads[at]++
		if fmt.Sprint(values) != fmt.Sprint(want) {
			return fmt.Errorf("key %d: SELECT returned %q", k, values)
		}
		// The replica itself, at ONE: the row is where the ring says.
		iter = session.Query(selectV, k).SetHostID(replica.HostID()).Consistency(gocql.One).Iter()
		what = fmt.Sprintf("SELECT at ONE of key %d on its replica", k)
		if values, err = readV(iter, what); err != nil {
			return err
		}
		if at, err = sentTo(iter, replica, what); err != nil {
			return err
		}
		direct[at]++
		if fmt.Sprint(values) != fmt.Sprint(want) {
			return fmt.Errorf("key %d: its replica %s returned %q at ONE", k, at, values)
		}
	}

	var addresses []string
	for _, h := range session.GetHosts() {
		addresses = append(addresses, h.ConnectAddressAndPort())
	}
	sort.Strings(addresses)
	for _, a := range addresses {
		fmt.Printf("go-gocql: routing: %s: replica of %d keys, coordinated %d INSERTs, %d SELECTs, %d SELECTs at ONE\n",
			a, owned[a], writes[a], reads[a], direct[a])
	}
	if len(owned) != expected {
		return fmt.Errorf("%d keys have replicas on %d of %d nodes", routingKeys, len(owned), expected)
	}
	return nil
}

// ring is the token ring as the driver's hosts describe it: every vnode token, sorted, with its
// host.
type ring struct {
	tokens []int64
	hosts  []*gocql.HostInfo
}

func newRing(hosts []*gocql.HostInfo) (*ring, error) {
	type vnode struct {
		token int64
		host  *gocql.HostInfo
	}
	var vnodes []vnode
	for _, h := range hosts {
		if len(h.Tokens()) == 0 {
			return nil, fmt.Errorf("host %s has no tokens in the driver's metadata", h.ConnectAddressAndPort())
		}
		for _, text := range h.Tokens() {
			t, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("host %s: token %q: %w", h.ConnectAddressAndPort(), text, err)
			}
			vnodes = append(vnodes, vnode{t, h})
		}
	}
	sort.Slice(vnodes, func(i, j int) bool { return vnodes[i].token < vnodes[j].token })
	r := &ring{}
	for _, v := range vnodes {
		r.tokens = append(r.tokens, v.token)
		r.hosts = append(r.hosts, v.host)
	}
	return r, nil
}

// owner is the host of the first token at or after t, wrapping around: the key's replica under
// SimpleStrategy with RF 1.
func (r *ring) owner(t int64) *gocql.HostInfo {
	i := sort.Search(len(r.tokens), func(i int) bool { return r.tokens[i] >= t })
	if i == len(r.tokens) {
		i = 0
	}
	return r.hosts[i]
}

// murmur3Token is Cassandra's Murmur3Partitioner token of a partition key: the first 64 bits of
// MurmurHash3 x64_128 (seed 0) with Cassandra's quirk of sign-extending the tail bytes, and
// Long.MIN_VALUE mapped to Long.MAX_VALUE.
func murmur3Token(data []byte) int64 {
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	var h1, h2 uint64
	n := len(data) / 16
	for i := 0; i < n; i++ {
		k1 := binary.LittleEndian.Uint64(data[i*16:])
		k2 := binary.LittleEndian.Uint64(data[i*16+8:])
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
		h1 = bits.RotateLeft64(h1, 27) + h2
		h1 = h1*5 + 0x52dce729
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
		h2 = bits.RotateLeft64(h2, 31) + h1
		h2 = h2*5 + 0x38495ab5
	}
	tail := data[n*16:]
	// Java's bytes are signed: each tail byte is sign-extended before the shift.
	signed := func(i int) uint64 { return uint64(int64(int8(tail[i]))) }
	var k1, k2 uint64
	for i := len(tail) - 1; i >= 8; i-- {
		k2 ^= signed(i) << (8 * (i - 8))
	}
	if len(tail) > 8 {
		h2 ^= bits.RotateLeft64(k2*c2, 33) * c1
	}
	for i := min(len(tail), 8) - 1; i >= 0; i-- {
		k1 ^= signed(i) << (8 * i)
	}
	if len(tail) > 0 {
		h1 ^= bits.RotateLeft64(k1*c1, 31) * c2
	}
	h1 ^= uint64(len(data))
	h2 ^= uint64(len(data))
	h1 += h2
	h2 += h1
	h1, h2 = fmix64(h1), fmix64(h2)
	h1 += h2
	if t := int64(h1); t != math.MinInt64 {
		return t
	}
	return math.MaxInt64
}

func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
