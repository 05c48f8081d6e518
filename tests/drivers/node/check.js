// Driver-matrix client for the Node.js `cassandra-driver` (npm).
//
// Usage: node check.js HOST PORT
//
// The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
// schema metadata on, create a keyspace and a table, check the table in the driver's schema
// metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check each
// row arrives exactly once and in clustering order, drop the keyspace, disconnect.
// Exit code 0 on success, 1 with a message naming the failed check otherwise.
'use strict';

const cassandra = require('cassandra-driver');

const SIDE = 5; // rows are (k, c) for k, c in [0, SIDE): SIDE partitions of SIDE rows
const PAGE_SIZE = 7; // smaller than the 25 rows and not a divisor of SIDE: pages end mid-partition
const REQUEST_TIMEOUT_MS = 30000; // Cassandra's schema changes on a loaded 2-core machine take seconds

function ensure(condition, message) {
  if (!condition) throw new Error(message);
}

// Every (k, c) exactly once; each partition's rows contiguous and in clustering order.
// Partitions come in token order, which is not checked.
function checkRows(rows, pages) {
  const total = SIDE * SIDE;
  const minPages = Math.ceil(total / PAGE_SIZE);
  ensure(pages >= minPages, `${pages} pages, expected at least ${minPages}`);
  ensure(rows.length === total, `${rows.length} rows, expected ${total}`);
  const seen = new Set();
  for (let start = 0; start < rows.length; start += SIDE) {
    const k = rows[start].k;
    ensure(!seen.has(k), `partition k=${k} is not contiguous`);
    seen.add(k);
    const run = rows.slice(start, start + SIDE);
    const cs = run.map((r) => r.c);
    ensure(run.every((r) => r.k === k) && cs.join() === '0,1,2,3,4',
      `partition k=${k}: rows ${JSON.stringify(run)}`);
    for (const r of run) ensure(r.v === `v${r.k}_${r.c}`, `row (${r.k}, ${r.c}) has v=${r.v}`);
  }
  ensure(seen.size === SIDE, `partitions ${[...seen]}`);
}

async function exercise(client, keyspace) {
  const table = `${keyspace}.rows`;
  await client.execute(`CREATE KEYSPACE ${keyspace} WITH replication = ` +
    "{'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute(`CREATE TABLE ${table} (k int, c int, v text, PRIMARY KEY (k, c))`);

  // Metadata sync is on by default: the driver reads system_schema.* after schema changes.
  await client.metadata.refreshKeyspace(keyspace);
  const tblMeta = await client.metadata.getTable(keyspace, 'rows');
  ensure(tblMeta, 'table rows missing from driver metadata');
  const columns = tblMeta.columns.map((c) => c.name).sort();
  ensure(columns.join() === 'c,k,v', `metadata columns ${columns}`);
  ensure(tblMeta.partitionKeys.map((c) => c.name).join() === 'k', 'partition key');
  ensure(tblMeta.clusteringKeys.map((c) => c.name).join() === 'c', 'clustering key');

  // Insert with bound values through a prepared statement.
  const insert = `INSERT INTO ${table} (k, c, v) VALUES (?, ?, ?)`;
  for (let k = 0; k < SIDE; k++) {
    for (let c = 0; c < SIDE; c++) {
      await client.execute(insert, [k, c, `v${k}_${c}`], { prepare: true });
    }
  }

  // Read back page by page (manual pageState), so page count and sizes can be checked.
  const rows = [];
  let pages = 0;
  let pageState;
  do {
    const result = await client.execute(`SELECT k, c, v FROM ${table}`, [],
      { prepare: true, fetchSize: PAGE_SIZE, pageState });
    pages++;
    ensure(result.rows.length <= PAGE_SIZE, `page ${pages} has ${result.rows.length} rows`);
    rows.push(...result.rows.map((r) => ({ k: r.k, c: r.c, v: r.v })));
    pageState = result.pageState;
    ensure(pages < 100, 'more than 100 pages for 25 rows: paging never ends');
  } while (pageState);
  checkRows(rows, pages);
}

async function main() {
  if (process.argv.length !== 4) {
    console.error('usage: node check.js HOST PORT');
    process.exit(2);
  }
  const [host, port] = process.argv.slice(2);
  const client = new cassandra.Client({
    contactPoints: [host],
    protocolOptions: { port: Number(port) },
    // Must match system.local.data_center of the server.
    localDataCenter: 'datacenter1',
    isMetadataSyncEnabled: true, // the default; checking the metadata is part of the test
    socketOptions: { connectTimeout: 10000, readTimeout: REQUEST_TIMEOUT_MS },
  });
  const keyspace = `drivers_node_${process.pid}_${Date.now() % 1000000000}`;
  try {
    await client.connect();
    try {
      await exercise(client, keyspace);
    } finally {
      // Drop the keyspace even when a check failed, so reruns stay clean.
      await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
    }
    await client.shutdown();
  } catch (e) {
    console.error(`node-driver: FAILED: ${e.stack || e}`);
    await client.shutdown().catch(() => {});
    process.exit(1);
  }
  console.log('node-driver: OK');
}

main();
