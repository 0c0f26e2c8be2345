// The oracle for the names streamstate's KTable-KTable joins (on the primary key) give their
// nodes and stores: Kafka Streams' own describe() text of a fixed list of join programs, for
// tests/unit/test_dsl_table_table_join.py, which builds the same programs with streamstate's DSL
// and compares the texts.
//
//   java DescribeTableTableJoins
//
// Each program is built with a fresh StreamsBuilder (no broker, no configuration: default serdes,
// no optimization) and described with `builder.build().describe().toString()`. Topic, store and
// operation names are exactly those of the list below, so that the Python side can build the same
// programs.
//
// Prints one JSON line: {program name: describe() text}, in the order of the list, plus, for the
// programs that record it, `<program>.queryable`: the result table's queryableStoreName() (or
// "null"). A program whose build throws gets the text `ERROR: <exception class>: <message>`
// instead; any other failure exits 1 with a message on stderr.
//
//   java DescribeTableTableJoins --replay <file>
//
// runs each program of a second list (`replays()`) on Kafka Streams' TopologyTestDriver (default
// serdes String, String; caching as configured by default, the driver committing after each
// record) over the records of <file>, one a line: `topic \t key \t value \t timestamp`, where
// `<null>` is a null key or value; a record of a topic the program does not read is skipped.
// Prints one JSON line: {program name: [[input index, output topic, key, value, timestamp],
// ...]}, every record the program wrote to `out` or `out2` after each input, in order, then
// [-1, "dropped", null, null, <dropped-records-total>].

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.test.TestRecord;

public final class DescribeTableTableJoins {
    private DescribeTableTableJoins() {}

    /** Defines one program on `builder`; `extra` receives any further JSON entries. */
    private interface Dsl extends java.util.function.BiConsumer<StreamsBuilder, Map<String, String>> {}

    private static final ValueJoiner<String, String, String> JOINER = (a, b) -> a + "+" + b;

    private static KTable<String, String> table(StreamsBuilder builder, String topic) {
        return builder.<String, String>table(topic);
    }

    private static String queryable(KTable<?, ?> table) {
        String name = table.queryableStoreName();
        return name == null ? "null" : name;
    }

    /** The programs, by name, in the order of the report. */
    private static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        programs.put(
                "inner",
                (b, extra) -> {
                    KTable<String, String> joined =
                            table(b, "topic1").join(table(b, "topic2"), JOINER);
                    joined.toStream().to("output");
                    extra.put("inner.queryable", queryable(joined));
                });
        programs.put(
                "left",
                (b, extra) ->
                        table(b, "topic1").leftJoin(table(b, "topic2"), JOINER).toStream().to("output"));
        programs.put(
                "outer",
                (b, extra) ->
                        table(b, "topic1").outerJoin(table(b, "topic2"), JOINER).toStream().to("output"));
        programs.put(
                "inner_materialized_named",
                (b, extra) -> {
                    KTable<String, String> joined =
                            table(b, "topic1")
                                    .join(table(b, "topic2"), JOINER, Materialized.as("joined"));
                    joined.toStream().to("output");
                    extra.put("inner_materialized_named.queryable", queryable(joined));
                });
        programs.put(
                "left_materialized_unnamed",
                (b, extra) -> {
                    KTable<String, String> joined =
                            table(b, "topic1")
                                    .leftJoin(
                                            table(b, "topic2"),
                                            JOINER,
                                            Materialized.with(Serdes.String(), Serdes.String()));
                    joined.toStream().to("output");
                    extra.put("left_materialized_unnamed.queryable", queryable(joined));
                });
        programs.put(
                "outer_materialized_named",
                (b, extra) ->
                        table(b, "topic1")
                                .outerJoin(table(b, "topic2"), JOINER, Materialized.as("outer-store"))
                                .toStream()
                                .to("output"));
        programs.put(
                "named",
                (b, extra) ->
                        table(b, "topic1")
                                .join(table(b, "topic2"), JOINER, Named.as("my-join"))
                                .toStream()
                                .to("output"));
        programs.put(
                "named_materialized",
                (b, extra) ->
                        table(b, "topic1")
                                .leftJoin(
                                        table(b, "topic2"),
                                        JOINER,
                                        Named.as("my-join"),
                                        Materialized.as("my-store"))
                                .toStream()
                                .to("output"));
        programs.put(
                "source_tables_materialized",
                (b, extra) ->
                        b.<String, String>table("topic1", Materialized.as("store1"))
                                .join(b.<String, String>table("topic2", Materialized.as("store2")), JOINER)
                                .toStream()
                                .to("output"));
        programs.put(
                "derived",
                (b, extra) ->
                        table(b, "topic1")
                                .filter((k, v) -> v != null)
                                .join(table(b, "topic2").mapValues(v -> v + "!"), JOINER)
                                .toStream()
                                .to("output"));
        programs.put(
                "derived_materialized",
                (b, extra) ->
                        table(b, "topic1")
                                .filter((k, v) -> v != null, Materialized.as("filtered"))
                                .leftJoin(
                                        table(b, "topic2")
                                                .mapValues(v -> v + "!", Materialized.as("mapped")),
                                        JOINER)
                                .toStream()
                                .to("output"));
        programs.put(
                "chained",
                (b, extra) ->
                        table(b, "topic1")
                                .join(table(b, "topic2"), JOINER)
                                .leftJoin(table(b, "topic3"), JOINER)
                                .outerJoin(table(b, "topic4"), JOINER)
                                .toStream()
                                .to("output"));
        programs.put(
                "join_then_filter",
                (b, extra) ->
                        table(b, "topic1")
                                .join(table(b, "topic2"), JOINER)
                                .filter((k, v) -> v.length() > 3)
                                .toStream()
                                .to("output"));
        programs.put(
                "join_then_map_values_materialized",
                (b, extra) ->
                        table(b, "topic1")
                                .outerJoin(table(b, "topic2"), JOINER)
                                .mapValues(v -> v + "!", Materialized.as("mapped"))
                                .toStream()
                                .to("output"));
        programs.put(
                "join_then_group_by",
                (b, extra) ->
                        table(b, "topic1")
                                .join(table(b, "topic2"), JOINER)
                                .groupBy((k, v) -> KeyValue.pair(v, k))
                                .count()
                                .toStream()
                                .to("output"));
        programs.put(
                "join_then_suppress",
                (b, extra) ->
                        table(b, "topic1")
                                .leftJoin(table(b, "topic2"), JOINER)
                                .suppress(
                                        Suppressed.untilTimeLimit(
                                                Duration.ofSeconds(1), Suppressed.BufferConfig.unbounded()))
                                .toStream()
                                .to("output"));
        programs.put(
                "aggregate_join",
                (b, extra) ->
                        b.<String, String>stream("events")
                                .groupByKey()
                                .count()
                                .mapValues(c -> Long.toString(c))
                                .join(table(b, "topic2"), JOINER)
                                .toStream()
                                .to("output"));
        programs.put(
                "join_result_joined_again",
                (b, extra) -> {
                    KTable<String, String> t1 = table(b, "topic1");
                    KTable<String, String> t2 = table(b, "topic2");
                    KTable<String, String> joined = t1.join(t2, JOINER);
                    t1.leftJoin(joined, JOINER).toStream().to("output");
                });
        return programs;
    }

    /** The programs the replay mode runs, by name: they read t1..t4 and write out (and out2). */
    private static Map<String, Consumer<StreamsBuilder>> replays() {
        Map<String, Consumer<StreamsBuilder>> s = new LinkedHashMap<>();
        s.put("inner", b -> table(b, "t1").join(table(b, "t2"), JOINER).toStream().to("out"));
        s.put("left", b -> table(b, "t1").leftJoin(table(b, "t2"), JOINER).toStream().to("out"));
        s.put("outer", b -> table(b, "t1").outerJoin(table(b, "t2"), JOINER).toStream().to("out"));
        s.put(
                "inner_cached",
                b -> table(b, "t1").join(table(b, "t2"), JOINER, Materialized.as("m")).toStream().to("out"));
        s.put(
                "outer_cached",
                b -> table(b, "t1").outerJoin(table(b, "t2"), JOINER, Materialized.as("m")).toStream().to("out"));
        s.put(
                "left_uncached",
                b ->
                        table(b, "t1")
                                .leftJoin(
                                        table(b, "t2"),
                                        JOINER,
                                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("m")
                                                .withCachingDisabled())
                                .toStream()
                                .to("out"));
        s.put(
                "join_then_filter",
                b ->
                        table(b, "t1")
                                .join(table(b, "t2"), JOINER)
                                .filter((k, v) -> v.contains("1"))
                                .toStream()
                                .to("out"));
        s.put(
                "left_then_filter_not",
                b ->
                        table(b, "t1")
                                .leftJoin(table(b, "t2"), JOINER)
                                .filterNot((k, v) -> v.endsWith("null"))
                                .toStream()
                                .to("out"));
        s.put(
                "join_then_group_by",
                b ->
                        table(b, "t1")
                                .leftJoin(table(b, "t2"), JOINER)
                                .groupBy((k, v) -> KeyValue.pair(v.substring(0, 2), v))
                                .count()
                                .toStream()
                                .mapValues(c -> Long.toString(c))
                                .to("out"));
        s.put(
                "derived",
                b ->
                        table(b, "t1")
                                .filter((k, v) -> !v.startsWith("c"))
                                .join(table(b, "t2").mapValues(v -> v + "!"), JOINER)
                                .toStream()
                                .to("out"));
        s.put(
                "chain",
                b ->
                        table(b, "t1")
                                .join(table(b, "t2"), JOINER)
                                .leftJoin(table(b, "t3"), JOINER)
                                .outerJoin(table(b, "t4"), JOINER)
                                .toStream()
                                .to("out"));
        s.put(
                "joined_again",
                b -> {
                    KTable<String, String> joined = table(b, "t1").outerJoin(table(b, "t2"), JOINER);
                    table(b, "t3").leftJoin(joined, JOINER).toStream().to("out");
                });
        s.put(
                "joined_again_inner",
                b -> {
                    KTable<String, String> joined = table(b, "t1").leftJoin(table(b, "t2"), JOINER);
                    table(b, "t3").join(joined, JOINER).toStream().to("out");
                });
        s.put(
                "self_join",
                b -> {
                    KTable<String, String> one = table(b, "t1");
                    one.join(one, JOINER).toStream().to("out");
                });
        s.put(
                "map_values_materialized_then_join",
                b -> {
                    KTable<String, String> one = table(b, "t1");
                    one.mapValues(v -> v + "?", Materialized.as("mv")).toStream().to("out2");
                    one.leftJoin(table(b, "t2"), JOINER).toStream().to("out");
                });
        return s;
    }

    public static void main(String[] argv) {
        BenchSupport.main(
                "DescribeTableTableJoins",
                argv,
                args -> {
                    String replay = args.optional("replay", null);
                    if (replay == null) {
                        run();
                    } else {
                        replay(Path.of(replay));
                    }
                });
    }

    static void run() {
        BenchSupport.printDescriptions(programs());
    }

    static void replay(Path file) throws java.io.IOException {
        List<String[]> inputs = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            if (!line.isEmpty()) {
                inputs.add(line.split("\t", -1));
            }
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "describe-table-table-joins");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATE_DIR_CONFIG, BenchSupport.driverStateDir());
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Consumer<StreamsBuilder>> program : replays().entrySet()) {
            StreamsBuilder builder = new StreamsBuilder();
            program.getValue().accept(builder);
            List<String> rows = new ArrayList<>();
            try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props)) {
                Map<String, TestInputTopic<String, String>> in = new LinkedHashMap<>();
                for (String topic : new String[] {"t1", "t2", "t3", "t4"}) {
                    in.put(
                            topic,
                            driver.createInputTopic(
                                    topic, Serdes.String().serializer(), Serdes.String().serializer()));
                }
                Map<String, TestOutputTopic<String, String>> out = new LinkedHashMap<>();
                for (String topic : new String[] {"out", "out2"}) {
                    out.put(
                            topic,
                            driver.createOutputTopic(
                                    topic, Serdes.String().deserializer(), Serdes.String().deserializer()));
                }
                for (int i = 0; i < inputs.size(); i++) {
                    String[] r = inputs.get(i);
                    String key = r[1].equals("<null>") ? null : r[1];
                    String value = r[2].equals("<null>") ? null : r[2];
                    try {
                        in.get(r[0]).pipeInput(key, value, Long.parseLong(r[3]));
                    } catch (IllegalArgumentException unknownTopic) {
                        continue; // a topic this program does not read
                    }
                    for (Map.Entry<String, TestOutputTopic<String, String>> topic : out.entrySet()) {
                        for (TestRecord<String, String> rec : topic.getValue().readRecordsToList()) {
                            rows.add(
                                    "["
                                            + i
                                            + ", "
                                            + BenchSupport.quote(topic.getKey())
                                            + ", "
                                            + BenchSupport.quote(rec.key())
                                            + ", "
                                            + BenchSupport.quote(rec.value())
                                            + ", "
                                            + rec.timestamp()
                                            + "]");
                        }
                    }
                }
                double dropped =
                        driver.metrics().entrySet().stream()
                                .filter(m -> m.getKey().name().equals("dropped-records-total"))
                                .mapToDouble(m -> ((Number) m.getValue().metricValue()).doubleValue())
                                .sum();
                rows.add("[-1, \"dropped\", null, null, " + (long) dropped + "]");
            }
            if (json.length() > 1) {
                json.append(", ");
            }
            json.append(BenchSupport.quote(program.getKey())).append(": [").append(String.join(", ", rows)).append("]");
        }
        System.out.println(json.append("}"));
        System.out.flush();
    }

}
