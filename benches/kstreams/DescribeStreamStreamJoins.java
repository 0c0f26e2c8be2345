// The oracle for the names of streamstate's windowed KStream-KStream joins: Kafka Streams' own
// describe() text of the join programs below, for tests/integration/test_dsl_stream_stream_join
// (its Python twins must describe themselves word for word the same).
//
//   java DescribeStreamStreamJoins
//
// Each program is built with a fresh StreamsBuilder (no broker, no configuration: default serdes,
// no optimization) and described with `builder.build().describe().toString()`. Every program
// reads `left` and `right` and writes `out`; programs differ in the join (inner, left, outer),
// the StreamJoined name / store name given, and key changes before the join.
//
// Prints one JSON line: {program name: describe() text}, in the order of the list. A program
// whose build throws gets the text `ERROR: <exception class>: <message>` instead.

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;

public final class DescribeStreamStreamJoins {
    private DescribeStreamStreamJoins() {}

    private interface Dsl extends java.util.function.Consumer<StreamsBuilder> {}

    private interface Join {
        KStream<String, String> apply(
                KStream<String, String> left,
                KStream<String, String> right,
                JoinWindows windows,
                StreamJoined<String, String, String> joined);
    }

    private static final ValueJoiner<String, String, String> JOINER = (a, b) -> a + "+" + b;

    private static final Map<String, Join> KINDS = new LinkedHashMap<>();

    static {
        KINDS.put("inner", (l, r, w, j) -> j == null ? l.join(r, JOINER, w) : l.join(r, JOINER, w, j));
        KINDS.put("left", (l, r, w, j) -> j == null ? l.leftJoin(r, JOINER, w) : l.leftJoin(r, JOINER, w, j));
        KINDS.put("outer", (l, r, w, j) -> j == null ? l.outerJoin(r, JOINER, w) : l.outerJoin(r, JOINER, w, j));
    }

    private static JoinWindows windows() {
        return JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(100), Duration.ofMillis(10));
    }

    private static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        for (Map.Entry<String, Join> kind : KINDS.entrySet()) {
            String k = kind.getKey();
            Join join = kind.getValue();
            programs.put(k, b -> join.apply(b.stream("left"), b.stream("right"), windows(), null).to("out"));
            programs.put(k + "_named", b -> join.apply(b.stream("left"), b.stream("right"), windows(),
                    StreamJoined.<String, String, String>as("shop").withName("enrich")).to("out"));
            programs.put(k + "_name_only", b -> join.apply(b.stream("left"), b.stream("right"), windows(),
                    StreamJoined.<String, String, String>with(null, null, null).withName("enrich")).to("out"));
            programs.put(k + "_store_only", b -> join.apply(b.stream("left"), b.stream("right"), windows(),
                    StreamJoined.<String, String, String>as("shop")).to("out"));
            programs.put(k + "_key_changed", b -> {
                KStream<String, String> left = b.<String, String>stream("left").map((key, v) -> KeyValue.pair(v, key));
                KStream<String, String> right = b.<String, String>stream("right").selectKey((key, v) -> v);
                join.apply(left, right, windows(), null).mapValues(v -> v).to("out");
            });
            programs.put(k + "_key_changed_named", b -> {
                KStream<String, String> left = b.<String, String>stream("left").map((key, v) -> KeyValue.pair(v, key));
                KStream<String, String> right = b.<String, String>stream("right").selectKey((key, v) -> v);
                join.apply(left, right, windows(),
                        StreamJoined.<String, String, String>with(null, null, null).withName("enrich")).to("out");
            });
        }
        programs.put("right_key_changed_left", b -> {
            KStream<String, String> right = b.<String, String>stream("right").selectKey((key, v) -> v);
            b.<String, String>stream("left").leftJoin(right, JOINER, windows()).to("out");
        });
        programs.put("self_join", b -> {
            KStream<String, String> s = b.stream("left");
            s.join(s, JOINER, windows()).to("out");
        });
        programs.put("two_joins", b -> {
            KStream<String, String> l = b.stream("left");
            KStream<String, String> r = b.stream("right");
            l.join(r, JOINER, windows()).leftJoin(r, JOINER, windows()).to("out");
        });
        programs.put("reused_repartition", b -> {
            KStream<String, String> left = b.<String, String>stream("left").selectKey((key, v) -> v);
            KStream<String, String> right = b.stream("right");
            left.join(right, JOINER, windows()).to("out");
            left.leftJoin(right, JOINER, windows()).to("out2");
        });
        programs.put("self_join_key_changed", b -> {
            KStream<String, String> s = b.<String, String>stream("left").selectKey((key, v) -> v);
            s.leftJoin(s, JOINER, windows()).to("out");
        });
        programs.put("join_then_count", b -> {
            KStream<String, String> left = b.stream("left");
            KStream<String, String> right = b.stream("right");
            left.outerJoin(right, JOINER, windows())
                    .selectKey((key, v) -> v)
                    .groupByKey()
                    .count()
                    .toStream()
                    .to("out");
        });
        return programs;
    }

    public static void main(String[] argv) {
        BenchSupport.main("DescribeStreamStreamJoins", argv, args -> run());
    }

    static void run() {
        BenchSupport.printPlainDescriptions(programs());
    }
}
