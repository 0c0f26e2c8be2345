// The oracle for streamstate's windowed KStream-KStream joins: Kafka Streams 4.4's own
// TopologyTestDriver running the join scenarios of tests/unit/test_dsl_stream_stream_join.py,
// for tests/integration/test_dsl_stream_stream_join_oracle.py (streamstate's driver must write
// exactly the same records, and count the same dropped records).
//
//   java StreamStreamJoinScenarios --s0 "<scenario>" --s1 "<scenario>" ...
//
// A scenario is `name;kind;before;after;grace;emitIntervalMs;events`: kind `inner`, `left` or
// `outer`; the JoinWindows' before, after and grace (ms); the emit interval (Kafka's internal
// `__emit.interval.ms.kstreams.outer.join.spurious.results.fix__`); events separated by spaces:
// `L:key:value:ts` / `R:key:value:ts` pipe a record to topic `l` / `r` (`~` is null), `W:ms`
// advances the driver's wall-clock time, `;` reads what the join wrote to `out` since. Both
// topics are String/String, the joiner is `left + "+" + right` (null prints as `null`), and
// the driver's wall clock starts at 0, as streamstate's does.
//
// Prints one JSON line: {scenario name: JSON text {"batches": [[[key, value, ts], ...], ...],
// "dropped": dropped-records-total}}.

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.test.TestRecord;

public final class StreamStreamJoinScenarios {
    private StreamStreamJoinScenarios() {}

    public static void main(String[] argv) {
        BenchSupport.main("StreamStreamJoinScenarios", argv, StreamStreamJoinScenarios::run);
    }

    static void run(BenchSupport.Args args) {
        Map<String, String> report = new LinkedHashMap<>();
        for (int i = 0; ; i++) {
            String scenario = args.optional("s" + i, null);
            if (scenario == null) {
                break;
            }
            String[] parts = scenario.split(";", 7);
            report.put(parts[0], runOne(parts));
        }
        System.out.println(BenchSupport.json(report));
        System.out.flush();
    }

    private static String runOne(String[] parts) {
        String kind = parts[1];
        JoinWindows windows = JoinWindows
                .ofTimeDifferenceAndGrace(Duration.ZERO, Duration.ofMillis(Long.parseLong(parts[4])))
                .before(Duration.ofMillis(Long.parseLong(parts[2])))
                .after(Duration.ofMillis(Long.parseLong(parts[3])));
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> left = builder.stream("l", Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> right = builder.stream("r", Consumed.with(Serdes.String(), Serdes.String()));
        ValueJoiner<String, String, String> joiner = (a, b) -> a + "+" + b;
        StreamJoined<String, String, String> joined =
                StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
        KStream<String, String> out = kind.equals("inner")
                ? left.join(right, joiner, windows, joined)
                : kind.equals("left")
                        ? left.leftJoin(right, joiner, windows, joined)
                        : left.outerJoin(right, joiner, windows, joined);
        out.to("out", Produced.with(Serdes.String(), Serdes.String()));
        Properties props = new Properties();
        props.put("application.id", "stream-stream-join-scenarios");
        props.put("state.dir", BenchSupport.driverStateDir());
        props.put("bootstrap.servers", "unused:9092");
        props.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", Long.parseLong(parts[5]));
        List<String> batches = new ArrayList<>();
        double dropped = 0;
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, String> lefts =
                    driver.createInputTopic("l", new StringSerializer(), new StringSerializer());
            TestInputTopic<String, String> rights =
                    driver.createInputTopic("r", new StringSerializer(), new StringSerializer());
            TestOutputTopic<String, String> written =
                    driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            for (String event : parts[6].trim().split("\\s+")) {
                if (event.equals(";")) {
                    List<String> batch = new ArrayList<>();
                    for (TestRecord<String, String> r : written.readRecordsToList()) {
                        batch.add("[" + text(r.key()) + ", " + text(r.value()) + ", " + r.timestamp() + "]");
                    }
                    batches.add("[" + String.join(", ", batch) + "]");
                } else if (event.startsWith("W:")) {
                    driver.advanceWallClockTime(Duration.ofMillis(Long.parseLong(event.substring(2))));
                } else {
                    String[] f = event.split(":", -1);
                    (f[0].equals("L") ? lefts : rights)
                            .pipeInput(nullable(f[1]), nullable(f[2]), Long.parseLong(f[3]));
                }
            }
            for (Map.Entry<MetricName, ? extends Metric> metric : driver.metrics().entrySet()) {
                if (metric.getKey().name().equals("dropped-records-total")) {
                    dropped += (Double) metric.getValue().metricValue();
                }
            }
        }
        return "{\"batches\": [" + String.join(", ", batches) + "], \"dropped\": " + dropped + "}";
    }

    private static String nullable(String text) {
        return text.equals("~") ? null : text;
    }

    private static String text(String value) {
        return value == null ? "null" : "\"" + value + "\"";
    }
}
