// The oracle for streamstate's foreign-key table-table join (KIP-213): Kafka Streams' own
// describe() text of a fixed list of foreign-key join programs, and the output of Kafka's
// TopologyTestDriver for scripted inputs to two of them.
//
//   java DescribeForeignKeyJoins
//       prints one JSON line {program name: describe() text}
//   java DescribeForeignKeyJoins --run <inner|left|inner_store|left_store> <step>...
//       pipes each step into Java's TopologyTestDriver running `left.join(right, v ->
//       v.split("\\|")[1] (null for "none"), (a, b) -> "(" + a + "," + b + ")")` (or leftJoin; "_store":
//       materialized as "store", caching disabled) over String tables `left_table` and
//       `right_table`, and prints one JSON line {"output": [[key, value, timestamp], ...],
//       "store": [[key, value], ...]} (what `output-topic` received, in order, and the
//       final contents of "store"). A step is `<L|R>|<key>|<value>|<timestamp>`, the value
//       `~` for a tombstone (values may contain `|`: the last field is the timestamp).
//
// Each program is built with a fresh StreamsBuilder (no configuration: default serdes, no
// optimization); topic, store and operation names are those the Python side builds.

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.function.Function;
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
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;

public final class DescribeForeignKeyJoins {
    private DescribeForeignKeyJoins() {}

    private interface Dsl extends java.util.function.Consumer<StreamsBuilder> {}

    /** The foreign key: the text after `|`, `null` for the text `none`. */
    private static final Function<String, String> FK =
            v -> {
                String key = v.split("\\|")[1];
                return key.equals("none") ? null : key;
            };
    private static final ValueJoiner<String, String, String> JOINER =
            (a, b) -> "(" + a + "," + b + ")";

    private static KTable<String, String> table(StreamsBuilder b, String topic) {
        return b.table(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    private static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        programs.put(
                "fk_inner",
                b -> table(b, "left").join(table(b, "right"), FK, JOINER).toStream().to("out"));
        programs.put(
                "fk_left",
                b -> table(b, "left").leftJoin(table(b, "right"), FK, JOINER).toStream().to("out"));
        programs.put(
                "fk_materialized",
                b ->
                        table(b, "left")
                                .join(
                                        table(b, "right"),
                                        FK,
                                        JOINER,
                                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(
                                                "fk-result"))
                                .toStream()
                                .to("out"));
        programs.put(
                "fk_named",
                b ->
                        table(b, "left")
                                .join(table(b, "right"), FK, JOINER, TableJoined.as("fkj"))
                                .toStream()
                                .to("out"));
        programs.put(
                "fk_named_left_materialized",
                b ->
                        table(b, "left")
                                .leftJoin(
                                        table(b, "right"),
                                        FK,
                                        JOINER,
                                        TableJoined.as("fkj"),
                                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(
                                                "fk-store"))
                                .toStream()
                                .to("out"));
        programs.put(
                "fk_with_key",
                b ->
                        table(b, "left")
                                .join(table(b, "right"), (k, v) -> k + v, JOINER)
                                .toStream()
                                .to("out"));
        programs.put(
                "fk_right_first",
                b -> {
                    KTable<String, String> right = table(b, "right");
                    table(b, "left").join(right, FK, JOINER).toStream().to("out");
                });
        programs.put(
                "fk_derived",
                b ->
                        table(b, "left")
                                .filter((k, v) -> true)
                                .join(table(b, "right").mapValues(v -> v), FK, JOINER)
                                .toStream()
                                .to("out"));
        programs.put(
                "fk_chained",
                b -> {
                    KTable<String, String> first =
                            table(b, "left").join(table(b, "right"), FK, JOINER);
                    first.join(table(b, "third"), FK, JOINER).toStream().to("out");
                });
        programs.put(
                "fk_aggregated_left",
                b ->
                        b.stream("events", Consumed.with(Serdes.String(), Serdes.String()))
                                .groupByKey()
                                .reduce((x, y) -> y)
                                .leftJoin(table(b, "right"), FK, JOINER)
                                .toStream()
                                .to("out"));
        return programs;
    }

    public static void main(String[] argv) {
        BenchSupport.main(
                "DescribeForeignKeyJoins",
                new String[0],
                args -> {
                    if (argv.length > 1 && argv[0].equals("--run")) {
                        run(argv);
                    } else {
                        describe();
                    }
                });
    }

    static void describe() {
        BenchSupport.printPlainDescriptions(programs());
    }

    static void run(String[] argv) {
        String program = argv[1];
        boolean leftJoin = program.startsWith("left");
        boolean stored = program.endsWith("_store");
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> left = table(builder, "left_table");
        KTable<String, String> right = table(builder, "right_table");
        Materialized<String, String, KeyValueStore<Bytes, byte[]>> mat =
                stored
                        ? Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("store")
                                .withValueSerde(Serdes.String())
                                .withCachingDisabled()
                        : Materialized.<String, String, KeyValueStore<Bytes, byte[]>>with(
                                        null, Serdes.String())
                                .withCachingDisabled();
        KTable<String, String> joined =
                leftJoin ? left.leftJoin(right, FK, JOINER, mat) : left.join(right, FK, JOINER, mat);
        joined.toStream().to("output-topic");
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, "fk-oracle");
        config.put(StreamsConfig.STATE_DIR_CONFIG, BenchSupport.driverStateDir());
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        StringBuilder out = new StringBuilder("{\"output\": [");
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), config)) {
            TestInputTopic<String, String> leftIn =
                    driver.createInputTopic(
                            "left_table", new StringSerializer(), new StringSerializer());
            TestInputTopic<String, String> rightIn =
                    driver.createInputTopic(
                            "right_table", new StringSerializer(), new StringSerializer());
            TestOutputTopic<String, String> output =
                    driver.createOutputTopic(
                            "output-topic", new StringDeserializer(), new StringDeserializer());
            for (int i = 2; i < argv.length; i++) {
                String step = argv[i];
                int first = step.indexOf('|');
                int second = step.indexOf('|', first + 1);
                int last = step.lastIndexOf('|');
                String key = step.substring(first + 1, second);
                String value = step.substring(second + 1, last);
                long timestamp = Long.parseLong(step.substring(last + 1));
                TestInputTopic<String, String> in = step.startsWith("L") ? leftIn : rightIn;
                in.pipeInput(key, value.equals("~") ? null : value, timestamp);
            }
            List<String> records = new ArrayList<>();
            for (TestRecord<String, String> r : output.readRecordsToList()) {
                records.add(
                        "["
                                + BenchSupport.quote(r.key())
                                + ", "
                                + BenchSupport.quote(r.value())
                                + ", "
                                + r.timestamp()
                                + "]");
            }
            out.append(String.join(", ", records)).append("], \"store\": [");
            List<String> rows = new ArrayList<>();
            if (stored) {
                KeyValueStore<String, String> store = driver.getKeyValueStore("store");
                try (KeyValueIterator<String, String> all = store.all()) {
                    while (all.hasNext()) {
                        KeyValue<String, String> kv = all.next();
                        rows.add("[" + BenchSupport.quote(kv.key) + ", " + BenchSupport.quote(kv.value) + "]");
                    }
                }
            }
            out.append(String.join(", ", rows)).append("]}");
        }
        System.out.println(out);
        System.out.flush();
    }

}
