// Writes `placement.txt`, the replica lists Cassandra 5.0's own SimpleStrategy and
// NetworkTopologyStrategy compute for fixed rings, which `tests/placement.rs` checks Helenus's
// locator against. Run from this directory (see README.md):
//
//   CP="$CASSANDRA_HOME/lib/*"
//   javac -cp "$CP" -d /tmp/placement Placement.java
//   java -cp "/tmp/placement:$CP" Placement > placement.txt
import java.net.InetAddress;
import java.util.*;

import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.dht.Murmur3Partitioner;
import org.apache.cassandra.dht.Token;
import org.apache.cassandra.locator.*;

public class Placement
{
    static final Map<InetAddressAndPort, String[]> locations = new HashMap<>();

    static class Snitch extends AbstractNetworkTopologySnitch
    {
        public String getRack(InetAddressAndPort ep) { return locations.get(ep)[1]; }
        public String getDatacenter(InetAddressAndPort ep) { return locations.get(ep)[0]; }
    }

    static InetAddressAndPort address(int node) throws Exception
    {
        return InetAddressAndPort.getByAddress(InetAddress.getByAddress(new byte[]{ 127, 0, (byte) (node / 256), (byte) (node % 256) }));
    }

    static int node(InetAddressAndPort ep)
    {
        byte[] b = ep.getAddress().getAddress();
        return (b[2] & 0xff) * 256 + (b[3] & 0xff);
    }

    /** One ring: `dcs[i]` and `racks[i]` place node i + 1, which owns `vnodes` random tokens. */
    static void scenario(String name, long seed, String[] dcs, String[] racks, int vnodes, List<Map<String, String>> strategies, long[] fixedQueries) throws Exception
    {
        Random random = new Random(seed);
        Snitch snitch = new Snitch();
        TokenMetadata metadata = new TokenMetadata(snitch);
        System.out.println("scenario " + name);
        Set<Long> used = new HashSet<>();
        for (int i = 0; i < dcs.length; i++)
        {
            InetAddressAndPort ep = address(i + 1);
            locations.put(ep, new String[]{ dcs[i], racks[i] });
            List<Token> tokens = new ArrayList<>();
            StringBuilder line = new StringBuilder("node " + (i + 1) + " " + dcs[i] + " " + racks[i]);
            while (tokens.size() < vnodes)
            {
                long t = random.nextLong();
                if (t == Long.MIN_VALUE || !used.add(t))
                    continue;
                tokens.add(new Murmur3Partitioner.LongToken(t));
                line.append(' ').append(t);
            }
            metadata.updateNormalTokens(tokens, ep);
            System.out.println(line);
        }
        List<Long> queries = new ArrayList<>();
        for (long q : fixedQueries)
            queries.add(q);
        // Every ring token, one either side of it, and random ones.
        for (Token t : metadata.sortedTokens())
        {
            long v = (Long) t.getTokenValue();
            queries.add(v);
            if (v != Long.MAX_VALUE) queries.add(v + 1);
            if (v != Long.MIN_VALUE + 1) queries.add(v - 1);
        }
        for (int i = 0; i < 20; i++)
            queries.add(random.nextLong());
        for (Map<String, String> options : strategies)
        {
            Map<String, String> rest = new TreeMap<>(options);
            String klass = rest.remove("class");
            AbstractReplicationStrategy strategy = klass.equals("SimpleStrategy")
                                                   ? new SimpleStrategy("ks", metadata, snitch, rest)
                                                   : new NetworkTopologyStrategy("ks", metadata, snitch, rest);
            StringBuilder line = new StringBuilder("strategy " + klass);
            for (Map.Entry<String, String> e : rest.entrySet())
                line.append(' ').append(e.getKey()).append('=').append(e.getValue());
            System.out.println(line);
            for (long q : queries)
            {
                StringBuilder out = new StringBuilder("replicas " + q);
                for (InetAddressAndPort ep : strategy.calculateNaturalReplicas(new Murmur3Partitioner.LongToken(q), metadata).endpointList())
                    out.append(' ').append(node(ep));
                System.out.println(out);
            }
        }
        locations.clear();
    }

    static Map<String, String> options(String... kv)
    {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2)
            m.put(kv[i], kv[i + 1]);
        return m;
    }

    public static void main(String[] args) throws Exception
    {
        DatabaseDescriptor.clientInitialization();
        DatabaseDescriptor.setPartitionerUnsafe(Murmur3Partitioner.instance);
        long[] edges = { Long.MIN_VALUE + 1, -1, 0, 1, Long.MAX_VALUE };
        scenario("three nodes, one token each", 1,
                 new String[]{ "dc1", "dc1", "dc1" }, new String[]{ "r1", "r1", "r1" }, 1,
                 List.of(options("class", "SimpleStrategy", "replication_factor", "1"),
                         options("class", "SimpleStrategy", "replication_factor", "2"),
                         options("class", "SimpleStrategy", "replication_factor", "3"),
                         options("class", "SimpleStrategy", "replication_factor", "5"),
                         options("class", "NetworkTopologyStrategy", "dc1", "2")),
                 edges);
        scenario("one node, sixteen vnodes", 2,
                 new String[]{ "datacenter1" }, new String[]{ "rack1" }, 16,
                 List.of(options("class", "SimpleStrategy", "replication_factor", "3"),
                         options("class", "NetworkTopologyStrategy", "datacenter1", "3")),
                 edges);
        scenario("two data centres, racks, vnodes", 3,
                 new String[]{ "dc1", "dc1", "dc1", "dc1", "dc2", "dc2", "dc2" },
                 new String[]{ "a", "a", "b", "b", "x", "y", "z" }, 4,
                 List.of(options("class", "SimpleStrategy", "replication_factor", "3"),
                         options("class", "NetworkTopologyStrategy", "dc1", "3", "dc2", "2"),
                         options("class", "NetworkTopologyStrategy", "dc1", "1", "dc2", "3"),
                         options("class", "NetworkTopologyStrategy", "dc1", "5", "dc2", "5"),
                         options("class", "NetworkTopologyStrategy", "dc2", "1"),
                         options("class", "NetworkTopologyStrategy", "dc1", "2", "dc3", "2")),
                 edges);
        scenario("three data centres, uneven racks", 4,
                 new String[]{ "east", "east", "east", "east", "east", "west", "west", "west", "west", "north", "north" },
                 new String[]{ "r1", "r1", "r1", "r2", "r3", "r1", "r1", "r2", "r2", "r1", "r1" }, 8,
                 List.of(options("class", "SimpleStrategy", "replication_factor", "4"),
                         options("class", "NetworkTopologyStrategy", "east", "3", "west", "3", "north", "2"),
                         options("class", "NetworkTopologyStrategy", "east", "4", "west", "1", "north", "1"),
                         options("class", "NetworkTopologyStrategy", "east", "2", "west", "4")),
                 edges);
    }
}
