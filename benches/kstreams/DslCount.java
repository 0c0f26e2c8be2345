// The DSL counts of benches/bench_dsl.py in Kafka Streams: a count per key, or per key and
// 1-minute tumbling window, of JSON records, run until the driver closes this program's stdin.
//
//   java DslCount --bootstrap HOST:PORT --application-id APP --input-topic IN --sink-topic OUT
//                 --program count|windowed --state-dir EMPTY_DIR [--timeout-ms 600000]
//                 [--config key=value ...]
//
// The topology (DSL), the one streamstate's benchmark program builds:
//   count     stream(IN, String keys, JSON values (Jackson, parsed per record)).groupByKey()
//             .count().toStream().to(OUT, String keys, Long values)
//   windowed  the same with .windowedBy(TimeWindows.ofSizeWithNoGrace(1 minute)) before count();
//             OUT's keys are Kafka's time-windowed String keys (the key's bytes, then the
//             window start as 8 big-endian bytes: WindowedSerdes.timeWindowedSerdeFrom)
// The count's store is Kafka's default for the operation: persistent (RocksDB), logged (its
// changelog `APP-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog`), cached. Settings: see
// BenchSupport.java (1 s commits, the 10 MiB record cache: OUT gets the latest count of each key
// (and window) at every commit; the last record per key is its final count).
//
// Protocol with the driver (benches/_kstreams.py, run_dsl_count): the program prints the line
// {"event": "started"} on stdout just before KafkaStreams.start(), then runs until its stdin
// reaches its end (the driver closes it once the application's committed offsets reach the end
// of IN), then closes Kafka Streams (flushing the cache, committing, leaving the group) and
// prints one JSON line:
//   start_to_running_s   from start() to the state RUNNING
//   run_s                from start() to the end of stdin
//   close_s              how long close() took
//   dropped_records      the sum of the task-level metric dropped-records-total (records too
//                        late for their window, or invalid) at the end of stdin
// and the Kafka Streams version. Exits 1 with a message on stderr if anything fails.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.time.Duration;
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
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;

public final class DslCount {
    private DslCount() {}

    static final long WINDOW_MS = 60_000L;

    /** JSON values as Jackson trees: each record's value is parsed, as streamstate's
     *  Serdes.Json() and Quix's "json" deserializer parse theirs. */
    static Serde<JsonNode> json() {
        ObjectMapper mapper = new ObjectMapper();
        Serializer<JsonNode> serializer =
                (topic, node) -> node == null ? null : jackson(() -> mapper.writeValueAsBytes(node));
        Deserializer<JsonNode> deserializer =
                (topic, data) -> data == null ? null : jackson(() -> mapper.readTree(data));
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

    public static void main(String[] argv) {
        BenchSupport.main("DslCount", argv, DslCount::run);
    }

    static void run(BenchSupport.Args args) throws Exception {
        String applicationId = args.required("application-id");
        String inputTopic = args.required("input-topic");
        String sinkTopic = args.required("sink-topic");
        String program = args.required("program");
        long timeoutMs = args.number("timeout-ms", 600_000L);
        Path stateDir = BenchSupport.freshStateDir(args);
        Properties props = BenchSupport.streamsConfig(args, applicationId, stateDir);

        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, JsonNode> grouped =
                builder.stream(inputTopic, Consumed.with(Serdes.String(), json())).groupByKey();
        switch (program) {
            case "count":
                grouped.count()
                        .toStream()
                        .to(sinkTopic, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            case "windowed":
                grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(WINDOW_MS)))
                        .count()
                        .toStream()
                        .to(
                                sinkTopic,
                                Produced.with(
                                        WindowedSerdes.timeWindowedSerdeFrom(String.class, WINDOW_MS),
                                        Serdes.Long()));
                break;
            default:
                throw new IllegalArgumentException("--program is count or windowed, not " + program);
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
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
            report.put("program", "DslCount-" + program);
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
            if (name.name().equals("dropped-records-total") && name.group().equals("stream-task-metrics")) {
                Object value = metric.getValue().metricValue();
                if (value instanceof Number) {
                    dropped += ((Number) value).doubleValue();
                }
            }
        }
        return (long) dropped;
    }
}
