// The oracle for versioned tables' names (KIP-889/KIP-914): Kafka Streams' own describe() text of
// DSL programs whose tables are materialized in a versioned store
// (Stores.persistentVersionedKeyValueStore), for tests/integration/test_dsl_versioned_describe.py.
//
//   java DescribeVersionedTables
//
// Prints one JSON line: {program name: describe() text}. A program whose build throws gets the
// text `ERROR: <exception class>: <message>`.

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class DescribeVersionedTables {
    private DescribeVersionedTables() {}

    private interface Dsl extends java.util.function.Consumer<StreamsBuilder> {}

    private static Materialized<String, String, KeyValueStore<Bytes, byte[]>> versioned(
            String name) {
        return Materialized.as(
                Stores.persistentVersionedKeyValueStore(name, Duration.ofMinutes(5)));
    }

    static Map<String, Dsl> programs() {
        Map<String, Dsl> programs = new LinkedHashMap<>();
        programs.put(
                "table",
                b -> b.<String, String>table("input", versioned("vs")).toStream().to("out"));
        programs.put(
                "table_group_by_count",
                b ->
                        b.<String, String>table("input", versioned("vs"))
                                .groupBy((k, v) -> KeyValue.pair(v, v))
                                .count()
                                .toStream()
                                .to("out"));
        programs.put(
                "table_filter_map_values",
                b ->
                        b.<String, String>table("input", versioned("vs"))
                                .filter((k, v) -> v != null)
                                .mapValues(v -> v + "!")
                                .toStream()
                                .to("out"));
        programs.put(
                "to_table_after_key_change",
                b ->
                        b.<String, String>stream("input")
                                .selectKey((k, v) -> v)
                                .toTable(versioned("vs"))
                                .toStream()
                                .to("out"));
        programs.put(
                "two_versioned_tables",
                b -> {
                    KTable<String, String> t1 = b.table("a", versioned("va"));
                    KTable<String, String> t2 = b.<String, String>stream("b").toTable(versioned("vb"));
                    t1.toStream().to("o1");
                    t2.toStream().to("o2");
                });
        programs.put(
                "suppress",
                b ->
                        b.<String, String>table("input", versioned("vs"))
                                .suppress(Suppressed.untilTimeLimit(Duration.ofMillis(10), Suppressed.BufferConfig.unbounded()))
                                .toStream()
                                .to("out"));
        return programs;
    }

    public static void main(String[] argv) {
        BenchSupport.main("DescribeVersionedTables", argv, args -> run());
    }

    static void run() {
        BenchSupport.printPlainDescriptions(programs());
    }
}
