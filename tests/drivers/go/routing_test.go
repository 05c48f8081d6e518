package main

import (
	"encoding/binary"
	"testing"
)

// Cassandra's Murmur3 tokens, as the Python driver's murmur3 (cassandra.murmur3) computes them:
// int keys (4 bytes big-endian), then byte strings that cover a full block and signed tail bytes.
func TestMurmur3TokenMatchesCassandra(t *testing.T) {
	ints := map[int32]int64{
		0:          -3485513579396041028,
		1:          -4069959284402364209,
		42:         -7160136740246525330,
		-1:         7297452126230313552,
		2147483647: -765994672030311617,
	}
	for k, want := range ints {
		key := binary.BigEndian.AppendUint32(nil, uint32(k))
		if got := murmur3Token(key); got != want {
			t.Errorf("int %d: token %d, want %d", k, got, want)
		}
	}
	bytes := map[string]int64{
		"":                 0,
		"hello":            -3758069500696749310,
		"0123456789abcdef": 5467490433528156583,
		"\x80\xff\x7f\x00helenus-murmur3-tail\xfe": 5736110785104850372,
	}
	for key, want := range bytes {
		if got := murmur3Token([]byte(key)); got != want {
			t.Errorf("%q: token %d, want %d", key, got, want)
		}
	}
}
