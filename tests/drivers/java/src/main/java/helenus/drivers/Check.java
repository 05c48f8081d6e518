package helenus.drivers;

import com.datastax.oss.driver.api.core.CqlIdentifier;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.ExecutionInfo;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.NodeState;
import com.datastax.oss.driver.api.core.metadata.TokenMap;
import com.datastax.oss.driver.api.core.metadata.schema.ColumnMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.KeyspaceMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.TableMetadata;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * Driver-matrix client for the Java driver 4.x.
 *
 * <p>Usage: java -cp ... helenus.drivers.Check HOST PORT
 *
 * <p>The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
 * schema metadata on, create a keyspace and a table, check the table in the driver's schema
 * metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check each
 * row arrives exactly once and in clustering order, drop the keyspace, disconnect. Exit code 0 on
 * success, 1 with a message naming the failed check otherwise.
 */
public final class Check {
  /** Rows are (k, c) for k, c in [0, SIDE): SIDE partitions of SIDE rows. */
  private static final int SIDE = 5;
  /** Smaller than the 25 rows and not a divisor of SIDE, so pages end mid-partition. */
  private static final int PAGE_SIZE = 7;
  /** Cassandra's schema changes on a loaded 2-core machine can take seconds. */
  private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(30);
  /** The routing check's keys: enough that every node of a 3-node ring (16 vnodes each) owns some. */
  private static final int ROUTING_KEYS = 100;
  /** How long the driver may take to connect to every node, or to learn a new keyspace's ring. */
  private static final Duration METADATA_WAIT = Duration.ofSeconds(20);

  private record Entry(int k, int c, String v) {}

  private static void ensure(boolean condition, String message) {
    if (!condition) {
      throw new IllegalStateException(message);
    }
  }

  public static void main(String[] args) {
    if (args.length != 2) {
      System.err.println("usage: Check HOST PORT");
      System.exit(2);
    }
    try {
      run(args[0], Integer.parseInt(args[1]));
    } catch (Exception e) {
      System.err.println("java-driver: FAILED: " + e);
      e.printStackTrace();
      System.exit(1);
    }
    System.out.println("java-driver: OK");
    // The driver's non-daemon threads are gone after close(); exit explicitly all the same.
    System.exit(0);
  }

  private static void run(String host, int port) {
    DriverConfigLoader config =
        DriverConfigLoader.programmaticBuilder()
            .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, REQUEST_TIMEOUT)
            .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofSeconds(10))
            .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, REQUEST_TIMEOUT)
            .withDuration(DefaultDriverOption.CONTROL_CONNECTION_AGREEMENT_TIMEOUT, REQUEST_TIMEOUT)
            // The default; checking the metadata is part of the test.
            .withBoolean(DefaultDriverOption.METADATA_SCHEMA_ENABLED, true)
            .build();
    String keyspace = "drivers_java_" + ProcessHandle.current().pid() + "_" + (System.nanoTime() % 1_000_000_000L);
    // try-with-resources closes the session (and its connections) at the end.
    try (CqlSession session =
        CqlSession.builder()
            .addContactPoint(new InetSocketAddress(host, port))
            // Must match system.local.data_center of the server.
            .withLocalDatacenter("datacenter1")
            .withConfigLoader(config)
            .build()) {
      // run-all's DRIVERS_NODES: a local cluster, every node of which the driver must find
      // (system.peers) and hold up.
      int expected = Integer.parseInt(System.getenv().getOrDefault("DRIVERS_NODES", "1"));
      if (expected > 1) {
        checkNodesUp(session, expected);
      }
      try {
        exercise(session, keyspace);
        if (expected > 1) {
          checkRouting(session, keyspace + "_routing", expected);
        }
      } finally {
        // Drop the keyspaces even when a check failed, so reruns stay clean.
        session.execute("DROP KEYSPACE IF EXISTS " + keyspace);
        if (expected > 1) {
          session.execute("DROP KEYSPACE IF EXISTS " + keyspace + "_routing");
        }
      }
    }
  }

  private static void exercise(CqlSession session, String keyspace) {
    String table = keyspace + ".rows";
    session.execute(
        "CREATE KEYSPACE " + keyspace
            + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    session.execute("CREATE TABLE " + table + " (k int, c int, v text, PRIMARY KEY (k, c))");

    // The driver reads system_schema.* into its metadata; the new table must be there.
    KeyspaceMetadata ksMeta =
        session.refreshSchema().getKeyspace(keyspace)
            .orElseThrow(() -> new IllegalStateException("keyspace missing from driver metadata"));
    TableMetadata tblMeta =
        ksMeta.getTable("rows")
            .orElseThrow(() -> new IllegalStateException("table rows missing from driver metadata"));
    Set<String> columns =
        tblMeta.getColumns().keySet().stream().map(CqlIdentifier::asInternal)
            .collect(Collectors.toCollection(TreeSet::new));
    ensure(columns.equals(new TreeSet<>(List.of("c", "k", "v"))), "metadata columns " + columns);
    ensure(names(tblMeta.getPartitionKey()).equals(List.of("k")), "partition key");
    ensure(names(tblMeta.getClusteringColumns().keySet()).equals(List.of("c")), "clustering key");

    // Insert with bound values through a prepared statement.
    PreparedStatement insert = session.prepare("INSERT INTO " + table + " (k, c, v) VALUES (?, ?, ?)");
    for (int k = 0; k < SIDE; k++) {
      for (int c = 0; c < SIDE; c++) {
        session.execute(insert.bind(k, c, "v" + k + "_" + c));
      }
    }

    // Read back page by page (explicit paging state), so page count and sizes can be checked.
    PreparedStatement select = session.prepare("SELECT k, c, v FROM " + table);
    List<Entry> rows = new ArrayList<>();
    int pages = 0;
    ByteBuffer pagingState = null;
    do {
      BoundStatement bound = select.bind().setPageSize(PAGE_SIZE).setPagingState(pagingState);
      ResultSet result = session.execute(bound);
      pages++;
      // Take only the rows of this page: iterating further would fetch the next page itself.
      int inPage = result.getAvailableWithoutFetching();
      ensure(inPage <= PAGE_SIZE, "page " + pages + " has " + inPage + " rows");
      for (int i = 0; i < inPage; i++) {
        Row row = result.one();
        rows.add(new Entry(row.getInt("k"), row.getInt("c"), row.getString("v")));
      }
      pagingState = result.getExecutionInfo().getPagingState();
      ensure(pages < 100, "more than 100 pages for 25 rows: paging never ends");
    } while (pagingState != null);
    checkRows(rows, pages);
  }

  /**
   * The driver's metadata holds EXPECTED nodes, all UP. A node is UP once its connection pool is
   * open, which may come a moment after the session is built, so this waits up to METADATA_WAIT.
   */
  private static void checkNodesUp(CqlSession session, int expected) {
    long deadline = System.nanoTime() + METADATA_WAIT.toNanos();
    while (true) {
      Collection<Node> nodes = session.getMetadata().getNodes().values();
      if (nodes.size() == expected && nodes.stream().allMatch(n -> n.getState() == NodeState.UP)) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            "expected " + expected + " nodes up, found "
                + nodes.stream().map(n -> n.getEndPoint() + " " + n.getState()).sorted()
                    .collect(Collectors.toList()));
      }
      sleep(Duration.ofMillis(100)); // poll interval
    }
  }

  /**
   * With a cluster of EXPECTED nodes: in a keyspace of RF 1, every prepared INSERT and SELECT of a
   * key, sent through the driver's default (token-aware) load balancing policy, goes to the one
   * replica the driver's token map names for the key, and only there; every node owns some keys;
   * and the key's replica, asked directly at ONE, returns the row. Prints the requests per node.
   */
  private static void checkRouting(CqlSession session, String keyspace, int expected) {
    String table = keyspace + ".kv";
    session.execute(
        "CREATE KEYSPACE " + keyspace
            + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    session.execute("CREATE TABLE " + table + " (k int PRIMARY KEY, v text)");
    session.refreshSchema();
    PreparedStatement insert = session.prepare("INSERT INTO " + table + " (k, v) VALUES (?, ?)");
    PreparedStatement select = session.prepare("SELECT v FROM " + table + " WHERE k = ?");
    ensure(select.getPartitionKeyIndices().equals(List.of(0)),
        "SELECT partition key indices " + select.getPartitionKeyIndices());
    CqlIdentifier ks = CqlIdentifier.fromInternal(keyspace);
    // The token map learns a new keyspace's replication from a schema refresh: wait for it.
    long deadline = System.nanoTime() + METADATA_WAIT.toNanos();
    while (replicas(session, ks, insert.bind(0, "")).isEmpty()) {
      ensure(System.nanoTime() < deadline, "no replicas for " + keyspace + " in the token map");
      sleep(Duration.ofMillis(100)); // poll interval
    }

    Map<Node, Integer> owned = new HashMap<>();
    Map<Node, Integer> writes = new HashMap<>();
    Map<Node, Integer> reads = new HashMap<>();
    Map<Node, Integer> direct = new HashMap<>();
    for (int k = 0; k < ROUTING_KEYS; k++) {
      BoundStatement bound = insert.bind(k, "r" + k);
      Node replica = replicaOf(session, ks, bound, k);
      owned.merge(replica, 1, Integer::sum);
      Node coordinator = sentTo(session.execute(bound), replica, "INSERT of key " + k);
      writes.merge(coordinator, 1, Integer::sum);
    }
    for (int k = 0; k < ROUTING_KEYS; k++) {
      BoundStatement bound = select.bind(k);
      Node replica = replicaOf(session, ks, bound, k);
      ResultSet result = session.execute(bound);
      reads.merge(sentTo(result, replica, "SELECT of key " + k), 1, Integer::sum);
      List<String> values = result.all().stream().map(r -> r.getString("v")).toList();
      ensure(values.equals(List.of("r" + k)), "key " + k + ": SELECT returned " + values);
      // The replica itself, at ONE: the row is where the ring says.
      result = session.execute(bound.setNode(replica).setConsistencyLevel(DefaultConsistencyLevel.ONE));
      Node at = sentTo(result, replica, "SELECT at ONE of key " + k + " on its replica");
      direct.merge(at, 1, Integer::sum);
      values = result.all().stream().map(r -> r.getString("v")).toList();
      ensure(values.equals(List.of("r" + k)),
          "key " + k + ": its replica " + replica.getEndPoint() + " returned " + values + " at ONE");
    }

    List<Node> nodes = new ArrayList<>(session.getMetadata().getNodes().values());
    nodes.sort(Comparator.comparing(n -> n.getEndPoint().toString()));
    for (Node n : nodes) {
      System.out.println("java-driver: routing: " + n.getEndPoint() + ": replica of "
          + owned.getOrDefault(n, 0) + " keys, coordinated " + writes.getOrDefault(n, 0)
          + " INSERTs, " + reads.getOrDefault(n, 0) + " SELECTs, " + direct.getOrDefault(n, 0)
          + " SELECTs at ONE");
    }
    ensure(owned.size() == expected,
        ROUTING_KEYS + " keys have replicas on " + owned.size() + " of " + expected + " nodes");
  }

  private static Set<Node> replicas(CqlSession session, CqlIdentifier keyspace, BoundStatement bound) {
    TokenMap tokenMap = session.getMetadata().getTokenMap()
        .orElseThrow(() -> new IllegalStateException("the driver has no token map"));
    return tokenMap.getReplicas(keyspace, bound.getRoutingKey());
  }

  private static Node replicaOf(CqlSession session, CqlIdentifier keyspace, BoundStatement bound, int k) {
    Set<Node> replicas = replicas(session, keyspace, bound);
    ensure(replicas.size() == 1, "key " + k + ": the driver's replicas " + replicas + ", expected one");
    return replicas.iterator().next();
  }

  /** The coordinator of RESULT, which must be REPLICA; no other node may have been tried first. */
  private static Node sentTo(ResultSet result, Node replica, String what) {
    ExecutionInfo info = result.getExecutionInfo();
    List<String> tried = new ArrayList<>();
    info.getErrors().forEach(e -> tried.add(e.getKey().getEndPoint() + " (" + e.getValue() + ")"));
    tried.add(String.valueOf(info.getCoordinator().getEndPoint()));
    ensure(info.getErrors().isEmpty() && replica.equals(info.getCoordinator()),
        what + " went to " + tried + ", the key's replica is " + replica.getEndPoint());
    return info.getCoordinator();
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  private static List<String> names(java.util.Collection<ColumnMetadata> columns) {
    return columns.stream().map(c -> c.getName().asInternal()).collect(Collectors.toList());
  }

  /**
   * Every (k, c) exactly once; each partition's rows contiguous and in clustering order.
   * Partitions come in token order, which is not checked.
   */
  private static void checkRows(List<Entry> rows, int pages) {
    int total = SIDE * SIDE;
    int minPages = (total + PAGE_SIZE - 1) / PAGE_SIZE;
    ensure(pages >= minPages, pages + " pages, expected at least " + minPages);
    ensure(rows.size() == total, rows.size() + " rows, expected " + total);
    Set<Integer> seen = new HashSet<>();
    for (int start = 0; start < rows.size(); start += SIDE) {
      int k = rows.get(start).k();
      ensure(seen.add(k), "partition k=" + k + " is not contiguous");
      for (int c = 0; c < SIDE; c++) {
        Entry e = rows.get(start + c);
        ensure(e.k() == k && e.c() == c, "partition k=" + k + ": row " + c + " is " + e);
        ensure(e.v().equals("v" + e.k() + "_" + e.c()), "row " + e + " has the wrong v");
      }
    }
    ensure(seen.size() == SIDE, "partitions " + seen);
  }

  private Check() {}
}
