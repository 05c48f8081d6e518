// Driver-matrix client for gocql (module github.com/apache/cassandra-gocql-driver/v2).
//
// Usage: go run . HOST PORT
//
// The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
// schema metadata on, create a keyspace and a table, check the table in the driver's schema
// metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check each
// row arrives exactly once and in clustering order, drop the keyspace, disconnect.
// Exit code 0 on success, 1 with a message naming the failed check otherwise.
package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

const (
	side     = 5 // rows are (k, c) for k, c in [0, side): side partitions of side rows
	pageSize = 7 // smaller than the 25 rows and not a divisor of side: pages end mid-partition
	// Cassandra's schema changes on a loaded 2-core machine can take seconds.
	requestTimeout = 30 * time.Second
	// How long the driver may take to add and connect to every node of the ring.
	connectWait = 20 * time.Second
)

type row struct {
	k, c int
	v    string
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: %s HOST PORT\n", os.Args[0])
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "go-gocql: FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("go-gocql: OK")
}

func run(host, portText string) error {
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("port %q: %w", portText, err)
	}
	cluster := gocql.NewCluster(host)
	cluster.Port = port
	cluster.Timeout = requestTimeout
	cluster.ConnectTimeout = 10 * time.Second
	cluster.Consistency = gocql.One
	// Token-aware (a key's replicas first), as gocql recommends; the routing check relies on it.
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	// Protocol version is negotiated (ProtoVersion 0). gocql loads schema metadata from
	// system_schema.* on demand (KeyspaceMetadata below) and keeps it fresh via schema events.
	session, err := cluster.CreateSession()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer session.Close()

	// run-all's DRIVERS_NODES: a local cluster, every node of which the driver must find
	// (system.peers) and hold up.
	expected := 1
	if text := os.Getenv("DRIVERS_NODES"); text != "" {
		if expected, err = strconv.Atoi(text); err != nil {
			return fmt.Errorf("DRIVERS_NODES %q: %w", text, err)
		}
	}
	if expected > 1 {
		if err := checkHostsUp(session, expected); err != nil {
			return err
		}
	}

	keyspace := fmt.Sprintf("drivers_go_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
	err = exercise(session, keyspace)
	if err == nil && expected > 1 {
		err = checkRouting(session, keyspace+"_routing", expected)
	}
	// Drop the keyspaces even when a check failed, so reruns against one server stay clean.
	if dropErr := session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); dropErr != nil && err == nil {
		err = fmt.Errorf("drop keyspace: %w", dropErr)
	}
	if expected > 1 {
		dropErr := session.Query("DROP KEYSPACE IF EXISTS " + keyspace + "_routing").Exec()
		if dropErr != nil && err == nil {
			err = fmt.Errorf("drop the routing keyspace: %w", dropErr)
		}
	}
	return err
}

func exercise(session *gocql.Session, keyspace string) error {
	table := keyspace + ".rows"
	if err := session.Query("CREATE KEYSPACE " + keyspace +
		" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		return fmt.Errorf("create keyspace: %w", err)
	}
	if err := session.Query("CREATE TABLE " + table +
		" (k int, c int, v text, PRIMARY KEY (k, c))").Exec(); err != nil {
		return fmt.Errorf("create table: %w", err)
	}

	tblMeta, err := waitForTableMetadata(session, keyspace, "rows")
	if err != nil {
		return err
	}
	var columns []string
	for name := range tblMeta.Columns {
		columns = append(columns, name)
	}
	sort.Strings(columns)
	if !reflect.DeepEqual(columns, []string{"c", "k", "v"}) {
		return fmt.Errorf("metadata columns %v", columns)
	}
	if len(tblMeta.PartitionKey) != 1 || tblMeta.PartitionKey[0].Name != "k" ||
		len(tblMeta.ClusteringColumns) != 1 || tblMeta.ClusteringColumns[0].Name != "c" {
		return fmt.Errorf("primary key in metadata: partition %v, clustering %v",
			tblMeta.PartitionKey, tblMeta.ClusteringColumns)
	}

	// gocql prepares every INSERT/SELECT/UPDATE/DELETE/BATCH itself (PREPARE once, then EXECUTE
	// with bound values), so this is a prepared statement.
	insert := "INSERT INTO " + table + " (k, c, v) VALUES (?, ?, ?)"
	for k := 0; k < side; k++ {
		for c := 0; c < side; c++ {
			if err := session.Query(insert, k, c, fmt.Sprintf("v%d_%d", k, c)).Exec(); err != nil {
				return fmt.Errorf("insert (%d, %d): %w", k, c, err)
			}
		}
	}

	// Read back page by page (manual paging state), so page count and sizes can be checked.
	var rows []row
	var state []byte
	pages := 0
	for {
		iter := session.Query("SELECT k, c, v FROM " + table).PageSize(pageSize).PageState(state).Iter()
		pages++
		pageRows := 0
		var r row
		for iter.Scan(&r.k, &r.c, &r.v) {
			rows = append(rows, r)
			pageRows++
		}
		// Read the paging state before Close, which may reset the iterator.
		state = iter.PageState()
		if err := iter.Close(); err != nil {
			return fmt.Errorf("select page %d: %w", pages, err)
		}
		if pageRows > pageSize {
			return fmt.Errorf("page %d has %d rows", pages, pageRows)
		}
		if len(state) == 0 {
			break
		}
		if pages >= 100 {
			return fmt.Errorf("more than 100 pages for 25 rows: paging never ends")
		}
	}
	return checkRows(rows, pages)
}

// checkHostsUp: the driver's ring (Session.GetHosts) holds expected hosts, all up. Hosts found
// in system.peers are added as the session starts; this waits up to connectWait for them.
func checkHostsUp(session *gocql.Session, expected int) error {
	deadline := time.Now().Add(connectWait)
	for {
		hosts := session.GetHosts()
		up := 0
		var found []string
		for _, h := range hosts {
			if h.IsUp() {
				up++
			}
			found = append(found, fmt.Sprintf("%s up=%v", h.ConnectAddressAndPort(), h.IsUp()))
		}
		if len(hosts) == expected && up == expected {
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(found)
			return fmt.Errorf("expected %d hosts up, found %v", expected, found)
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

// waitForTableMetadata polls gocql's schema metadata cache (CacheMode Full, the default) until
// the table appears. The cache is refreshed asynchronously, debounced, after the server pushes a
// SCHEMA_CHANGE event, so a DDL statement returning does not mean the cache has it yet.
func waitForTableMetadata(session *gocql.Session, keyspace, table string) (*gocql.TableMetadata, error) {
	deadline := time.Now().Add(requestTimeout)
	for {
		ksMeta, err := session.KeyspaceMetadata(keyspace)
		if err == nil {
			if tblMeta, ok := ksMeta.Tables[table]; ok {
				return tblMeta, nil
			}
			err = fmt.Errorf("table %s missing", table)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("driver metadata for %s.%s after %v: %w", keyspace, table, requestTimeout, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// checkRows: every (k, c) exactly once; each partition's rows contiguous and in clustering order.
// Partitions come in token order, which is not checked.
func checkRows(rows []row, pages int) error {
	total := side * side
	if minPages := (total + pageSize - 1) / pageSize; pages < minPages {
		return fmt.Errorf("%d pages, expected at least %d", pages, minPages)
	}
	if len(rows) != total {
		return fmt.Errorf("%d rows, expected %d", len(rows), total)
	}
	seen := map[int]bool{}
	for start := 0; start < len(rows); {
		k := rows[start].k
		if seen[k] {
			return fmt.Errorf("partition k=%d is not contiguous", k)
		}
		seen[k] = true
		end := start
		for end < len(rows) && rows[end].k == k {
			r := rows[end]
			if r.c != end-start {
				return fmt.Errorf("partition k=%d: clustering %d at position %d", k, r.c, end-start)
			}
			if want := fmt.Sprintf("v%d_%d", r.k, r.c); r.v != want {
				return fmt.Errorf("row (%d, %d) has v=%q", r.k, r.c, r.v)
			}
			end++
		}
		if end-start != side {
			return fmt.Errorf("partition k=%d has %d rows", k, end-start)
		}
		start = end
	}
	for k := 0; k < side; k++ {
		if !seen[k] {
			return fmt.Errorf("partition k=%d missing", k)
		}
	}
	return nil
}
