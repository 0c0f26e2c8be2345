// The oracle for the describe() of streamstate's stream-table and stream-global-table joins:
// Kafka Streams' own describe() text of a fixed list of join programs, for
// tests/unit/test_dsl_stream_table_join.py (which builds the same programs with streamstate's
// DSL and compares the texts).
//
//   java DescribeStreamTableJoins
//
// Each program is built with a fresh StreamsBuilder (no configuration: default serdes, no
// optimization) and described with `builder.build().describe().toString()`. Prints one JSON
// line: {program name: describe() text}, in the order of the list. A program whose build
// throws gets the text `ERROR: <exception class>: <message>` instead.

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.state.Stores;

public final class DescribeStreamTableJoins {
    private DescribeStreamTableJoins() {}

    /** Defines one program on `builder`. */
    private interface Dsl extends java.util.function.Consumer<StreamsBuilder> {}

    private static String joined(String a, String b) {
        return a + "+" + b;
    }

    /** The programs, by name, in the order of the report. */
    private static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        programs.put(
                "join",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t = b.table("customers");
                    s.join(t, DescribeStreamTableJoins::joined).to("out");
                });
        programs.put(
                "left_join",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t = b.table("customers");
                    s.leftJoin(t, DescribeStreamTableJoins::joined).to("out");
                });
        programs.put(
                "named_join",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t = b.table("customers", Materialized.as("customer-store"));
                    s.join(t, DescribeStreamTableJoins::joined, Joined.as("enrich")).to("out");
                });
        // Kafka's KStreamKTableJoinTest.shouldReuseRepartitionTopicWithGeneratedName.
        programs.put(
                "rekeyed_generated",
                b -> {
                    KStream<String, String> a = b.stream("topic");
                    KTable<String, String> t2 = b.table("topic2");
                    KTable<String, String> t3 = b.table("topic3");
                    KStream<String, String> rekeyed = a.map((k, v) -> new KeyValue<>(v, k));
                    rekeyed.join(t2, DescribeStreamTableJoins::joined).to("out-one");
                    rekeyed.join(t3, DescribeStreamTableJoins::joined).to("out-two");
                });
        // Kafka's KStreamKTableJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName.
        programs.put(
                "rekeyed_named",
                b -> {
                    KStream<String, String> a = b.stream("topic");
                    KTable<String, String> t2 = b.table("topic2");
                    KTable<String, String> t3 = b.table("topic3");
                    KStream<String, String> rekeyed = a.map((k, v) -> new KeyValue<>(v, k));
                    rekeyed.join(t2, DescribeStreamTableJoins::joined, Joined.as("first-join"))
                            .to("out-one");
                    rekeyed.join(t3, DescribeStreamTableJoins::joined, Joined.as("second-join"))
                            .to("out-two");
                });
        programs.put(
                "rekeyed_left_join",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t = b.table("customers");
                    s.selectKey((k, v) -> v)
                            .leftJoin(t, DescribeStreamTableJoins::joined)
                            .mapValues(v -> v)
                            .to("out");
                });
        programs.put(
                "filtered_table",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t =
                            b.<String, String>table("customers")
                                    .filter((k, v) -> true)
                                    .mapValues(v -> v);
                    s.join(t, DescribeStreamTableJoins::joined).to("out");
                });
        programs.put(
                "aggregated_table",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, Long> counts = b.<String, String>stream("clicks").groupByKey().count();
                    s.join(counts, (v, c) -> v + c).to("out");
                });
        programs.put(
                "stream_to_table",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t = b.<String, String>stream("updates").toTable();
                    s.leftJoin(t, DescribeStreamTableJoins::joined).to("out");
                });
        programs.put(
                "versioned_grace",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    KTable<String, String> t =
                            b.table(
                                    "prices",
                                    Materialized.as(
                                            Stores.persistentVersionedKeyValueStore(
                                                    "prices-store", Duration.ofMinutes(5))));
                    s.join(
                                    t,
                                    DescribeStreamTableJoins::joined,
                                    Joined.<String, String, String>as("priced")
                                            .withGracePeriod(Duration.ofMillis(100)))
                            .to("out");
                });
        programs.put(
                "reused_repartition_left_join",
                b -> {
                    KStream<String, String> s = b.stream("s");
                    KTable<String, String> t = b.table("t");
                    KStream<String, String> rekeyed = s.selectKey((k, v) -> v);
                    rekeyed.join(t, DescribeStreamTableJoins::joined).to("out");
                    rekeyed.leftJoin(t, DescribeStreamTableJoins::joined).to("out2");
                    s.repartition().leftJoin(t, DescribeStreamTableJoins::joined).to("out3");
                });
        programs.put(
                "global_join",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    GlobalKTable<String, String> g = b.globalTable("products");
                    s.join(g, (k, v) -> v, DescribeStreamTableJoins::joined).to("out");
                });
        programs.put(
                "global_left_join_named",
                b -> {
                    KStream<String, String> s = b.stream("orders");
                    GlobalKTable<String, String> g = b.globalTable("products");
                    s.selectKey((k, v) -> v)
                            .leftJoin(g, (k, v) -> v, DescribeStreamTableJoins::joined, Named.as("lookup"))
                            .groupByKey()
                            .count()
                            .toStream()
                            .to("out");
                });
        return programs;
    }

    public static void main(String[] argv) {
        BenchSupport.main("DescribeStreamTableJoins", argv, args -> run());
    }

    static void run() {
        BenchSupport.printPlainDescriptions(programs());
    }
}
