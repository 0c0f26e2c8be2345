// The stream-table enrichment of benches/bench_join.py in Kafka Streams: each JSON record of a
// stream joined with the current row of its key in a table, run until the driver closes this
// program's stdin.
//
//   java JoinEnrich --bootstrap HOST:PORT --application-id APP --table-topic TABLE
//                   --input-topic IN --sink-topic OUT --state-dir EMPTY_DIR
//                   [--timeout-ms 600000] [--config key=value ...]
//   java JoinEnrich --describe true --table-topic TABLE --input-topic IN --sink-topic OUT
//       prints {"describe": Topology.describe() text} and exits (no broker needed)
//
// The topology (DSL), the one streamstate's benchmark program builds:
//   users = table(TABLE, String keys, JSON values (Jackson, parsed per record))
//   stream(IN, String keys, JSON values).join(users, (order, user) -> order's fields then
//       user's, one new JSON object).to(OUT, String keys, JSON values)
// The table's store is Kafka's default for builder.table() without Materialized: persistent
// (RocksDB), logged (its changelog `APP-TABLE-STATE-STORE-0000000000-changelog`: the source
// topic is not reused as the changelog unless topology.optimization says so), cached. The
// join looks each stream record's key up in that store; a key with no row gives no output (an
// inner join). TABLE's timestamps are older than IN's, so Kafka Streams' choice of the record
// with the lowest timestamp among a task's partitions loads the table before the stream.
// Settings: see BenchSupport.java (1 s commits, the 10 MiB record cache, one stream thread).
//
// Protocol with the driver (benches/bench_join.py, through benches/_kstreams.py's
// run_until_done): prints {"event": "started"} on stdout just before KafkaStreams.start(), runs
// until its stdin reaches its end (the driver closes it once the application's committed
// offsets reach the end of IN), then closes Kafka Streams and prints one JSON line:
//   start_to_running_s   from start() to the state RUNNING
//   run_s                from start() to the end of stdin
//   close_s              how long close() took
//   dropped_records      the sum of the task-level metric dropped-records-total at the end
//                        of stdin (records with a null key or value, which a join skips)
// and the Kafka Streams version. Exits 1 with a message on stderr if anything fails.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

public final class JoinEnrich {
    private JoinEnrich() {}

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** JSON values as Jackson trees, parsed and written per record, as streamstate's
     *  Serdes.Json() and Quix's "json" serdes do theirs. */
    static Serde<JsonNode> json() {
        Serializer<JsonNode> serializer =
                (topic, node) -> node == null ? null : jackson(() -> MAPPER.writeValueAsBytes(node));
        Deserializer<JsonNode> deserializer =
                (topic, data) -> data == null ? null : jackson(() -> MAPPER.readTree(data));
        return Serdes.serdeFrom(serializer, deserializer);
    }

    /** A Jackson call that may fail. */
    private interface JacksonCall<T> {
        T call() throws IOException;
    }

    private static <T> T jackson(JacksonCall<T> call) {
        try {
            return call.call();
        } catch (IOException e) {
            throw new SerializationException("invalid JSON", e);
        }
    }

    /** The joiner: a new object with the order's fields, then the user's (Python's
     *  {**order, **user}; the benchmark's field names do not overlap). */
    static JsonNode enrich(JsonNode order, JsonNode user) {
        ObjectNode out = MAPPER.createObjectNode();
        out.setAll((ObjectNode) order);
        out.setAll((ObjectNode) user);
        return out;
    }

    public static void main(String[] argv) {
        BenchSupport.main("JoinEnrich", argv, JoinEnrich::run);
    }

    /** The benchmark's program (see the top of this file). */
    static Topology topology(String tableTopic, String inputTopic, String sinkTopic) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, JsonNode> users =
                builder.table(tableTopic, Consumed.with(Serdes.String(), json()));
        builder.stream(inputTopic, Consumed.with(Serdes.String(), json()))
                .join(users, JoinEnrich::enrich)
                .to(sinkTopic, Produced.with(Serdes.String(), json()));
        return builder.build();
    }

    static void run(BenchSupport.Args args) throws Exception {
        String tableTopic = args.required("table-topic");
        String inputTopic = args.required("input-topic");
        String sinkTopic = args.required("sink-topic");
        Topology topology = topology(tableTopic, inputTopic, sinkTopic);
        if (args.optional("describe", "false").equals("true")) {
            // No broker needed: the program's Topology.describe() text, for the check that
            // streamstate's benchmark program is the same topology.
            System.out.println(BenchSupport.json(Map.of("describe", topology.describe().toString())));
            System.out.flush();
            return;
        }
        String applicationId = args.required("application-id");
        long timeoutMs = args.number("timeout-ms", 600_000L);
        Path stateDir = BenchSupport.freshStateDir(args);
        Properties props = BenchSupport.streamsConfig(args, applicationId, stateDir);

        KafkaStreams streams = new KafkaStreams(topology, props);
        BenchSupport.Watch watch = new BenchSupport.Watch(streams);
        AtomicBoolean stdinClosed = new AtomicBoolean();
        Thread reader = new Thread(() -> drain(System.in, stdinClosed), "stdin-reader");
        reader.setDaemon(true);

        Map<String, Object> report = new LinkedHashMap<>();
        System.out.println(BenchSupport.json(Map.of("event", "started")));
        System.out.flush();
        long startedAt = System.nanoTime();
        try {
            streams.start();
            reader.start();
            BenchSupport.await("stdin to close", stdinClosed::get, watch, timeoutMs, 5);
            long doneAt = System.nanoTime();
            report.put("program", "JoinEnrich");
            report.put("kafka_streams_version", BenchSupport.kafkaStreamsVersion());
            report.put("start_to_running_s", BenchSupport.seconds(startedAt, watch.runningAt()));
            report.put("run_s", BenchSupport.seconds(startedAt, doneAt));
            report.put("dropped_records", droppedRecords(streams));
        } finally {
            report.put("close_s", BenchSupport.close(streams));
        }
        System.out.println(BenchSupport.json(report));
        System.out.flush();
    }

    /** Reads `in` to its end, then sets `closed`. */
    private static void drain(InputStream in, AtomicBoolean closed) {
        byte[] buffer = new byte[256];
        try {
            while (in.read(buffer) >= 0) {
                // the driver writes nothing: only the end matters
            }
        } catch (IOException e) {
            // a broken stdin ends the run as its end does
        }
        closed.set(true);
    }

    /** The sum over the tasks of Kafka Streams' metric dropped-records-total. */
    private static long droppedRecords(KafkaStreams streams) {
        double dropped = 0;
        for (Map.Entry<MetricName, ? extends Metric> metric : streams.metrics().entrySet()) {
            MetricName name = metric.getKey();
            if (name.name().equals("dropped-records-total")
                    && name.group().equals("stream-task-metrics")) {
                Object value = metric.getValue().metricValue();
                if (value instanceof Number) {
                    dropped += ((Number) value).doubleValue();
                }
            }
        }
        return (long) dropped;
    }
}
