// The oracle for versioned tables' behaviour (KIP-889 / KIP-914): Kafka Streams 4.4's own
// TopologyTestDriver on the programs of tests/unit/test_dsl_versioned_store.py (a versioned
// table read by toStream, filter, mapValues and a groupBy count; the same through toTable; a
// non-versioned table filtered and mapped into versioned stores), fed the same records.
//
//   java VersionedTablesOracle
//
// Prints one JSON line: {"<program>/<what>": text}, where <what> is an output topic (its records
// as "key=value@timestamp", space-separated, null printed as null), "asof" (the versioned store's
// answers to get("k", t) as "t=value@timestamp" or "t=null"), "latest" (get("k")) or "dropped"
// (the task's dropped-records-total).

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.test.TestRecord;

public final class VersionedTablesOracle {
    private VersionedTablesOracle() {}

    static final String[][] TABLE_INPUT = {
        {"k", "a", "100"}, {"k", "b", "50"}, {"k", "c", "200"}, {"k", null, "150"},
        {"k", "d", "300"}, {"k", "e", "150"}, {"k", "f", "250"}, {"j", null, "300"},
        {"j", "x", "280"}, {"k", "old", "190"}, {"k", "no", "400"}, {"k", null, "500"},
        {"k", "g", "450"},
    };
    static final long[] TABLE_AS_OF = {0, 300, 399, 400, 449, 450, 499, 500, 600};
    static final String[][] DERIVED_INPUT = {
        {"k", "a", "100"}, {"k", "b", "50"}, {"k", "xc", "200"}, {"k", "d", "150"},
        {"k", "e", "400"}, {"k", "f", "250"}, {"k", "g", "450"},
    };
    static final long[] DERIVED_AS_OF = {49, 50, 100, 150, 199, 200, 300, 350, 400, 450};

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> versioned(
            String name) {
        return Materialized.as(Stores.persistentVersionedKeyValueStore(name, Duration.ofMillis(100)));
    }

    private static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> uncachedCount() {
        return Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("cnt").withCachingDisabled();
    }

    private static Properties props() {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "versioned-oracle");
        p.put(StreamsConfig.STATE_DIR_CONFIG, BenchSupport.driverStateDir());
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "dummy:1");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        return p;
    }

    private static String record(VersionedRecord<String> r) {
        return r == null ? "null" : r.value() + "@" + r.timestamp();
    }

    private static void table(StreamsBuilder b, boolean toTable) {
        KTable<String, String> t = toTable
                ? b.<String, String>stream("in").toTable(versioned("vs"))
                : b.table("in", versioned("vs"));
        t.toStream().to("out");
        t.filter((k, v) -> !v.equals("no")).toStream().to("filtered");
        t.mapValues(v -> v + "!").toStream().to("mapped");
        t.groupBy((k, v) -> KeyValue.pair(v, v)).count(uncachedCount())
                .toStream().mapValues(v -> "" + v).to("counts");
    }

    private static void derived(StreamsBuilder b) {
        KTable<String, String> t = b.table("in",
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("plain").withCachingDisabled());
        KTable<String, String> f = t.filter((k, v) -> !v.startsWith("x"), versioned("vf"));
        f.toStream().to("filtered");
        t.mapValues(v -> v + "!", versioned("vm")).toStream().to("mapped");
        f.groupBy((k, v) -> KeyValue.pair(v, v)).count(uncachedCount())
                .toStream().mapValues(v -> "" + v).to("counts");
    }

    private static void run(String program, StreamsBuilder b, String[][] input, String[] topics,
                            String store, long[] asOf, Map<String, Object> report) {
        try (TopologyTestDriver d = new TopologyTestDriver(b.build(), props())) {
            TestInputTopic<String, String> in =
                    d.createInputTopic("in", new StringSerializer(), new StringSerializer());
            for (String[] r : input) {
                in.pipeInput(r[0], r[1], Long.parseLong(r[2]));
            }
            for (String topic : topics) {
                TestOutputTopic<String, String> out =
                        d.createOutputTopic(topic, new StringDeserializer(), new StringDeserializer());
                StringBuilder text = new StringBuilder();
                for (TestRecord<String, String> r : out.readRecordsToList()) {
                    text.append(text.length() == 0 ? "" : " ")
                            .append(r.key()).append('=').append(r.value()).append('@').append(r.timestamp());
                }
                report.put(program + "/" + topic, text.toString());
            }
            VersionedKeyValueStore<String, String> s = d.getVersionedKeyValueStore(store);
            StringBuilder text = new StringBuilder();
            for (long t : asOf) {
                text.append(text.length() == 0 ? "" : " ").append(t).append('=').append(record(s.get("k", t)));
            }
            report.put(program + "/asof", text.toString());
            report.put(program + "/latest", record(s.get("k")));
            d.metrics().forEach((name, metric) -> {
                if (name.name().equals("dropped-records-total")) {
                    report.put(program + "/dropped", String.valueOf(((Number) metric.metricValue()).longValue()));
                }
            });
        }
    }

    public static void main(String[] argv) {
        BenchSupport.main("VersionedTablesOracle", argv, args -> {
            Map<String, Object> report = new LinkedHashMap<>();
            String[] all = {"out", "filtered", "mapped", "counts"};
            for (boolean toTable : new boolean[] {false, true}) {
                StreamsBuilder b = new StreamsBuilder();
                table(b, toTable);
                run(toTable ? "to_table" : "table", b, TABLE_INPUT, all, "vs", TABLE_AS_OF, report);
            }
            StreamsBuilder b = new StreamsBuilder();
            derived(b);
            run("derived", b, DERIVED_INPUT, new String[] {"filtered", "mapped", "counts"}, "vf",
                    DERIVED_AS_OF, report);
            System.out.println(BenchSupport.json(report));
            System.out.flush();
        });
    }
}
