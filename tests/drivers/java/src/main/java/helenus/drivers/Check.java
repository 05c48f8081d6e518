package helenus.drivers;

import com.datastax.oss.driver.api.core.CqlIdentifier;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.metadata.schema.ColumnMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.KeyspaceMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.TableMetadata;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
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
      try {
        exercise(session, keyspace);
      } finally {
        // Drop the keyspace even when a check failed, so reruns stay clean.
        session.execute("DROP KEYSPACE IF EXISTS " + keyspace);
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
