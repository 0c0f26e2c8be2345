// The oracle for streamstate's Topology.describe(): Kafka Streams' own describe() text of a fixed
// list of DSL programs, for a test that compares streamstate's text against it.
//
//   java DescribeDsl
//
// Each program is built with a fresh StreamsBuilder (no broker, no configuration: default
// serdes, no optimization) and described with `builder.build().describe().toString()`. The
// lambdas' bodies do not appear in a description; they are kept sensible all the same. Topic,
// store and operation names are exactly those of the list below, so that the Python side can
// build the same programs.
//
// Prints one JSON line: {program name: describe() text}, in the order of the list, plus
//   split_keys   the keys of the Map that `split()...defaultBranch()` returned, comma-joined, in
//                the Map's iteration order: the order in which the program `split` sent its
//                branches to `out-0`, `out-1`, `out-2`. Kafka Streams' Map is a HashMap, so this
//                is not the order the branches were defined in (keys: the splitter's name then
//                1, 2 for the branches, 0 for the default branch)
// A program whose build throws gets the text `ERROR: <exception class>: <message>` instead; any
// other failure exits 1 with a message on stderr.

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class DescribeDsl {
    private DescribeDsl() {}

    /** Defines one program on `builder`; `extra` receives any further JSON entries. */
    private interface Dsl extends java.util.function.BiConsumer<StreamsBuilder, Map<String, String>> {}

    /** The words of a line: lowercased, split on whitespace, without empty strings. */
    private static List<String> words(String line) {
        List<String> words = new ArrayList<>();
        for (String word : line.toLowerCase(Locale.ROOT).split("\\s+")) {
            if (!word.isEmpty()) {
                words.add(word);
            }
        }
        return words;
    }

    /** The programs, by name, in the order of the report. */
    private static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        programs.put(
                "word_count",
                (b, extra) ->
                        b.<String, String>stream("text-lines")
                                .flatMapValues(DescribeDsl::words)
                                .groupBy((k, w) -> w)
                                .count()
                                .toStream()
                                .to("word-counts"));
        programs.put(
                "stateless",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .filter((k, v) -> true)
                                .filterNot((k, v) -> false)
                                .mapValues(v -> v)
                                .map((k, v) -> KeyValue.pair(k, v))
                                .flatMap((k, v) -> List.of(KeyValue.pair(k, v)))
                                .selectKey((k, v) -> k)
                                .peek((k, v) -> {})
                                .to("output"));
        programs.put(
                "foreach", (b, extra) -> b.<String, String>stream("input").foreach((k, v) -> {}));
        programs.put(
                "merge",
                (b, extra) -> {
                    KStream<String, String> a = b.stream("a");
                    KStream<String, String> c = b.stream("b");
                    a.merge(c).to("out");
                });
        programs.put(
                "split",
                (b, extra) -> {
                    Map<String, KStream<String, String>> branches =
                            b.<String, String>stream("input")
                                    .split()
                                    .branch((k, v) -> true)
                                    .branch((k, v) -> false)
                                    .defaultBranch();
                    int i = 0;
                    for (KStream<String, String> branch : branches.values()) {
                        branch.to("out-" + i);
                        i += 1;
                    }
                    extra.put("split_keys", String.join(",", branches.keySet()));
                });
        programs.put(
                "group_by_key_count",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .count()
                                .toStream()
                                .to("output"));
        programs.put(
                "map_group_by_key_reduce",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .map((k, v) -> KeyValue.pair(v, k))
                                .groupByKey()
                                .reduce((x, y) -> y)
                                .toStream()
                                .to("output"));
        programs.put(
                "aggregate",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .aggregate(
                                        () -> 0L,
                                        (k, v, agg) -> agg + 1,
                                        Materialized.with(Serdes.String(), Serdes.Long()))
                                .toStream()
                                .to("output"));
        programs.put(
                "named",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupBy((k, v) -> v, Grouped.as("by-word"))
                                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                                .toStream()
                                .to("out"));
        programs.put(
                "repartition",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .repartition(
                                        Repartitioned.<String, String>as("rp")
                                                .withNumberOfPartitions(3))
                                .to("out"));
        programs.put(
                "repartition_unnamed",
                (b, extra) -> b.<String, String>stream("input").repartition().to("out"));
        programs.put(
                "windowed_count",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)))
                                .count()
                                .toStream()
                                .to("output"));
        programs.put(
                "hopping_reduce",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(
                                        TimeWindows.ofSizeAndGrace(
                                                        Duration.ofMinutes(5), Duration.ofMinutes(1))
                                                .advanceBy(Duration.ofMinutes(1)))
                                .reduce((x, y) -> x + y)
                                .toStream()
                                .to("output"));
        programs.put(
                "emit_final",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)))
                                .emitStrategy(EmitStrategy.onWindowClose())
                                .count()
                                .toStream()
                                .to("output"));
        programs.put(
                "sliding",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(
                                        SlidingWindows.ofTimeDifferenceWithNoGrace(
                                                Duration.ofSeconds(10)))
                                .count()
                                .toStream()
                                .to("output"));
        programs.put(
                "session_suppress",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(
                                        SessionWindows.ofInactivityGapWithNoGrace(
                                                Duration.ofMinutes(5)))
                                .count()
                                .suppress(
                                        Suppressed.untilWindowCloses(
                                                Suppressed.BufferConfig.unbounded()))
                                .toStream()
                                .to("output"));
        programs.put(
                "session_aggregate",
                (b, extra) ->
                        b.<String, String>stream("input")
                                .groupByKey()
                                .windowedBy(
                                        SessionWindows.ofInactivityGapAndGrace(
                                                Duration.ofMinutes(5), Duration.ofMinutes(1)))
                                .aggregate(
                                        () -> 0L,
                                        (k, v, agg) -> agg + 1,
                                        (k, x, y) -> x + y,
                                        Materialized.with(Serdes.String(), Serdes.Long()))
                                .toStream()
                                .to("output"));
        programs.put(
                "table_ops",
                (b, extra) ->
                        b.<String, String>table("input")
                                .filter((k, v) -> true)
                                .mapValues(v -> v)
                                .toStream()
                                .to("out"));
        programs.put(
                "table_materialized",
                (b, extra) ->
                        b.table(
                                        "input",
                                        Materialized
                                                .<String, String, KeyValueStore<Bytes, byte[]>>as(
                                                        "input-store"))
                                .filterNot((k, v) -> false)
                                .toStream()
                                .to("out"));
        programs.put(
                "table_group_by_count",
                (b, extra) ->
                        b.<String, String>table("users")
                                .groupBy((k, v) -> KeyValue.pair(v, k))
                                .count()
                                .toStream()
                                .to("counts"));
        programs.put(
                "table_group_by_reduce",
                (b, extra) ->
                        b.<String, String>table("users")
                                .groupBy((k, v) -> KeyValue.pair(v, k))
                                .reduce((x, y) -> x + y, (x, y) -> x)
                                .toStream()
                                .to("out"));
        programs.put(
                "table_suppress",
                (b, extra) ->
                        b.<String, String>table("input")
                                .groupBy((k, v) -> KeyValue.pair(v, k))
                                .count()
                                .suppress(
                                        Suppressed.untilTimeLimit(
                                                Duration.ofSeconds(10),
                                                Suppressed.BufferConfig.maxRecords(100)
                                                        .emitEarlyWhenFull()))
                                .toStream()
                                .to("out"));
        programs.put(
                "to_table",
                (b, extra) ->
                        b.<String, String>stream("input").toTable().toStream().to("out"));
        programs.put(
                "global_table",
                (b, extra) -> {
                    b.<String, String>globalTable("g");
                    b.<String, String>stream("input").to("out");
                });
        programs.put(
                "two_groupings",
                (b, extra) -> {
                    KStream<String, String> s =
                            b.<String, String>stream("input").selectKey((k, v) -> v);
                    s.groupByKey().count().toStream().to("o1");
                    s.groupByKey().reduce((x, y) -> y).toStream().to("o2");
                });
        programs.put(
                "to_stream_mapper",
                (b, extra) ->
                        b.<String, String>table("input").toStream((k, v) -> k).to("out"));
        programs.put(
                "process",
                (b, extra) -> {
                    b.addStateStore(
                            Stores.keyValueStoreBuilder(
                                    Stores.persistentKeyValueStore("my-store"),
                                    Serdes.String(),
                                    Serdes.String()));
                    b.<String, String>stream("input")
                            .process(
                                    () ->
                                            new Processor<String, String, String, String>() {
                                                @Override
                                                public void process(Record<String, String> r) {}
                                            },
                                    "my-store")
                            .to("out");
                });
        return programs;
    }

    public static void main(String[] argv) {
        BenchSupport.main("DescribeDsl", argv, args -> run());
    }

    static void run() {
        BenchSupport.printDescriptions(programs());
    }
}
