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
// The routing check's keys: enough that every node of a 3-node ring (16 vnodes each) owns some.
const ROUTING_KEYS = 100;

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

// run-all's DRIVERS_NODES: a local cluster, every node of which the driver must find (system.peers)
// and hold up.
function checkHostsUp(client, expected) {
  const hosts = client.hosts.values();
  ensure(hosts.length === expected && hosts.every((h) => h.isUp()),
    `expected ${expected} hosts up, found ${JSON.stringify(hosts.map((h) => [h.address, h.isUp()]))}`);
}

// With a cluster of `expected` nodes: in a keyspace of RF 1, every prepared INSERT and SELECT of a
// key, sent through the driver's default (token-aware) load balancing policy, goes to the one
// replica the driver's metadata names for the key, and only there; every node owns some keys; and
// the key's replica, asked directly at ONE, returns the row. Prints the requests per node.
async function checkRouting(client, keyspace, expected) {
  const table = `${keyspace}.kv`;
  await client.execute(`CREATE KEYSPACE ${keyspace} WITH replication = ` +
    "{'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute(`CREATE TABLE ${table} (k int PRIMARY KEY, v text)`);
  // getReplicas needs the keyspace's replication in the driver's metadata.
  await client.metadata.refreshKeyspace(keyspace);
  const insert = `INSERT INTO ${table} (k, v) VALUES (?, ?)`;
  const select = `SELECT v FROM ${table} WHERE k = ?`;

  const replicaOf = (k) => {
    const routingKey = Buffer.alloc(4);
    routingKey.writeInt32BE(k); // an int partition key serialized, as the driver hashes it
    const replicas = client.getReplicas(keyspace, routingKey) || [];
    ensure(replicas.length === 1,
      `key ${k}: the driver's replicas ${JSON.stringify(replicas.map((h) => h.address))}, expected one`);
    return replicas[0];
  };
  const sentTo = (result, replica, what) => {
    // triedHosts: every host the request went to, in order, the last the one that answered.
    const tried = Object.keys(result.info.triedHosts || {});
    ensure(tried.length === 1 && tried[0] === replica.address &&
      result.info.queriedHost === replica.address,
      `${what} went to ${JSON.stringify(tried)}, the key's replica is ${replica.address}`);
    return replica.address;
  };
  const count = (counter, address) => counter.set(address, (counter.get(address) || 0) + 1);

  const owned = new Map();
  const writes = new Map();
  const reads = new Map();
  const direct = new Map();
  for (let k = 0; k < ROUTING_KEYS; k++) {
    const replica = replicaOf(k);
    count(owned, replica.address);
    const result = await client.execute(insert, [k, `r${k}`], { prepare: true });
    count(writes, sentTo(result, replica, `INSERT of key ${k}`));
  }
  for (let k = 0; k < ROUTING_KEYS; k++) {
    const replica = replicaOf(k);
    let result = await client.execute(select, [k], { prepare: true });
    count(reads, sentTo(result, replica, `SELECT of key ${k}`));
    let values = result.rows.map((r) => r.v);
    ensure(values.join() === `r${k}`, `key ${k}: SELECT returned ${JSON.stringify(values)}`);
    // The replica itself, at ONE: the row is where the ring says.
    result = await client.execute(select, [k],
      { prepare: true, host: replica, consistency: cassandra.types.consistencies.one });
    count(direct, sentTo(result, replica, `SELECT at ONE of key ${k} on its replica`));
    values = result.rows.map((r) => r.v);
    ensure(values.join() === `r${k}`,
      `key ${k}: its replica ${replica.address} returned ${JSON.stringify(values)} at ONE`);
  }

  for (const address of client.hosts.keys().sort()) {
    console.log(`node-driver: routing: ${address}: replica of ${owned.get(address) || 0} keys, ` +
      `coordinated ${writes.get(address) || 0} INSERTs, ${reads.get(address) || 0} SELECTs, ` +
      `${direct.get(address) || 0} SELECTs at ONE`);
  }
  ensure(owned.size === expected,
    `${ROUTING_KEYS} keys have replicas on ${owned.size} of ${expected} nodes`);
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
    const expected = Number(process.env.DRIVERS_NODES || '1');
    if (expected > 1) checkHostsUp(client, expected);
    try {
      await exercise(client, keyspace);
      if (expected > 1) await checkRouting(client, `${keyspace}_routing`, expected);
    } finally {
      // Drop the keyspaces even when a check failed, so reruns stay clean.
      await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
      if (expected > 1) await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}_routing`);
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
