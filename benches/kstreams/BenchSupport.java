// What RestoreBench and WordCount share: argument parsing, the Kafka Streams configuration a fair
// comparison needs, waiting for a state, and the one JSON line each program prints on stdout.
//
// Settings (each can be overridden with `--config key=value`; the Python driver
// benches/_kstreams.py passes none by default, so these are what the benchmarks measure):
//
//   num.stream.threads=1        One processing thread, as one streamstate stream thread or one
//                               Quix Streams process; Kafka Streams 4.x restores on the state
//                               updater thread of that stream thread. The machine has 2 cores
//                               shared with the broker.
//   processing.guarantee=at_least_once
//                               Kafka Streams' default, and the Python contenders' mode.
//   commit.interval.ms=1000     As the Python peers of benches/bench_app.py commit (Kafka Streams'
//                               default is 30 s under at-least-once; with its record cache a long
//                               interval would hide most changelog and sink writes).
//   statestore.cache.max.bytes=10485760
//                               Kafka Streams' default record cache (10 MiB), stated explicitly.
//   producer compression.type=lz4
//                               Changelog, repartition and sink topics are written with lz4, as
//                               the benchmarks' changelogs are (Kafka Streams' default is none).
//   restore.consumer.max.partition.fetch.bytes=4194304
//                               The restore consumer fetches 4 MiB per partition, as streamstate's
//                               restore consumer does (the Java default is 1 MiB).
//   auto.offset.reset=earliest, replication.factor=1 (one local broker), state.dir=<fresh dir>.
//   group.instance.id=<application.id>-bench
//                               Static membership, and close() leaves the group: a benchmark
//                               round restarts the same application.id (its changelog's name
//                               depends on it), and a dynamic member that closed without leaving
//                               (Kafka Streams' way) would hold the next round's rebalance until
//                               its session timed out (45 s).
//
// The JVM settings are the driver's (see benches/_kstreams.py): a fixed heap and G1.

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;

final class BenchSupport {
    private BenchSupport() {}

    /** A program's arguments: `--name value` pairs, where `--config key=value` may repeat. */
    static final class Args {
        private final Map<String, String> values = new HashMap<>();
        private final List<String> configs = new ArrayList<>();

        static Args parse(String[] argv) {
            Args args = new Args();
            for (int i = 0; i < argv.length; i += 2) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("expected --name value, got " + argv[i]);
                }
                String name = argv[i].substring(2);
                if (name.equals("config")) {
                    args.configs.add(argv[i + 1]);
                } else {
                    args.values.put(name, argv[i + 1]);
                }
            }
            return args;
        }

        String required(String name) {
            String value = values.get(name);
            if (value == null) {
                throw new IllegalArgumentException("missing --" + name);
            }
            return value;
        }

        String optional(String name, String fallback) {
            return values.getOrDefault(name, fallback);
        }

        long number(String name, long fallback) {
            String value = values.get(name);
            return value == null ? fallback : Long.parseLong(value);
        }

        List<String> configs() {
            return configs;
        }
    }

    /** The Kafka Streams configuration described at the top of this file, then the overrides. */
    static Properties streamsConfig(Args args, String applicationId, Path stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.required("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "1000");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.toString(10L << 20));
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.producerPrefix(ProducerConfig.COMPRESSION_TYPE_CONFIG), "lz4");
        props.put(
                StreamsConfig.restoreConsumerPrefix(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG),
                Integer.toString(4 << 20));
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, applicationId + "-bench");
        for (String config : args.configs()) {
            int eq = config.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--config expects key=value, got " + config);
            }
            props.put(config.substring(0, eq), config.substring(eq + 1));
        }
        return props;
    }

    /** The state directory, which must not exist yet or be empty: every run starts from nothing. */
    static Path freshStateDir(Args args) throws IOException {
        Path dir = Path.of(args.required("state-dir"));
        if (Files.isDirectory(dir)) {
            try (Stream<Path> entries = Files.list(dir)) {
                if (entries.findAny().isPresent()) {
                    throw new IllegalArgumentException("state dir " + dir + " is not empty");
                }
            }
        }
        Files.createDirectories(dir);
        return dir;
    }

    private static Path driverStateDir;

    /** The state directory of this JVM's TopologyTestDrivers: a fresh temporary one, deleted when
     *  the JVM exits. Without it a driver uses `<java.io.tmpdir>/kafka-streams/<application.id>`,
     *  shared by every process on the machine: two oracles of one fixed application.id at once
     *  (two pytest workers, two checkouts) would use one directory, and one driver's close()
     *  deletes the stores the other is using. */
    static synchronized String driverStateDir() {
        if (driverStateDir == null) {
            Path dir;
            try {
                dir = Files.createTempDirectory("kstreams-oracle-");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir)));
            driverStateDir = dir;
        }
        return driverStateDir.toString();
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        } catch (IOException e) {
            System.err.println("could not delete " + root + ": " + e);
        }
    }

    /** A program's body, run by {@link #main}. */
    interface Program {
        void run(Args args) throws Exception;
    }

    /** Runs `program` with the parsed arguments; any failure prints `name failed: ...` with its
     *  stack trace on stderr and exits 1 (Kafka Streams' own threads must not keep it alive). */
    static void main(String name, String[] argv, Program program) {
        try {
            program.run(Args.parse(argv));
        } catch (Exception e) {
            System.err.println(name + " failed: " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    /**
     * Watches a KafkaStreams instance (before its start): when it first reached RUNNING, and its
     * first fatal error (an uncaught exception in a stream thread, or the ERROR state), so that
     * a program fails at once instead of waiting for its deadline.
     */
    static final class Watch {
        private final AtomicReference<String> failure = new AtomicReference<>();
        private final AtomicLong runningAt = new AtomicLong(Long.MIN_VALUE);

        Watch(KafkaStreams streams) {
            streams.setUncaughtExceptionHandler(
                    error -> {
                        failure.compareAndSet(null, "stream thread failed: " + error);
                        return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                                .SHUTDOWN_CLIENT;
                    });
            streams.setStateListener(
                    (state, old) -> {
                        if (state == KafkaStreams.State.RUNNING) {
                            runningAt.compareAndSet(Long.MIN_VALUE, System.nanoTime());
                        }
                        if (state == KafkaStreams.State.ERROR
                                || state == KafkaStreams.State.PENDING_ERROR) {
                            failure.compareAndSet(null, "Kafka Streams went to state " + state);
                        }
                    });
        }

        boolean running() {
            return runningAt.get() != Long.MIN_VALUE;
        }

        /** System.nanoTime() when the instance first reached RUNNING. */
        long runningAt() {
            return runningAt.get();
        }

        void check() {
            String why = failure.get();
            if (why != null) {
                throw new IllegalStateException(why);
            }
        }
    }

    /** Polls `done` every `pollMs` until it holds; fails on `watch`'s failure or the deadline. */
    static void await(String what, BooleanSupplier done, Watch watch, long timeoutMs, long pollMs)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (!done.getAsBoolean()) {
            watch.check();
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out after " + timeoutMs + " ms waiting for " + what);
            }
            Thread.sleep(pollMs);
        }
    }

    /** Closes `streams`, leaving the group (see group.instance.id above); returns the seconds. */
    static double close(KafkaStreams streams) {
        long closing = System.nanoTime();
        streams.close(
            CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(60)));
        return seconds(closing, System.nanoTime());
    }

    static double seconds(long fromNanos, long toNanos) {
        return (toNanos - fromNanos) / 1e9;
    }

    static String kafkaStreamsVersion() {
        return AppInfoParser.getVersion();
    }

    /** One JSON object of numbers, booleans, strings, nulls and such objects, keys in insertion
     *  order. */
    static String json(Map<String, ?> fields) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, ?> field : fields.entrySet()) {
            if (out.length() > 1) {
                out.append(", ");
            }
            out.append(quote(field.getKey())).append(": ");
            Object value = field.getValue();
            if (value == null) {
                out.append("null");
            } else if (value instanceof Double || value instanceof Float) {
                out.append(String.format(Locale.ROOT, "%.6f", ((Number) value).doubleValue()));
            } else if (value instanceof Map) {
                @SuppressWarnings("unchecked")
                Map<String, ?> object = (Map<String, ?>) value;
                out.append(json(object));
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else {
                out.append(quote(value.toString()));
            }
        }
        return out.append('}').toString();
    }

    /** ``text`` as a JSON string (``null`` as null). */
    static String quote(String text) {
        if (text == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    /** The describe oracles' report: Kafka Streams' `describe()` text of each program, built on a
     *  fresh StreamsBuilder (no configuration: default serdes, no optimization), in order; a
     *  program whose build throws gets `ERROR: <exception class>: <message>`. A program may add
     *  entries of its own to `extra` (printed after the texts). Prints it as one JSON line. */
    static void printDescriptions(Map<String, ? extends BiConsumer<StreamsBuilder, Map<String, String>>> programs) {
        Map<String, String> report = new LinkedHashMap<>();
        Map<String, String> extra = new LinkedHashMap<>();
        for (Map.Entry<String, ? extends BiConsumer<StreamsBuilder, Map<String, String>>> program
                : programs.entrySet()) {
            String text;
            try {
                StreamsBuilder builder = new StreamsBuilder();
                program.getValue().accept(builder, extra);
                text = builder.build().describe().toString();
            } catch (RuntimeException e) {
                text = "ERROR: " + e.getClass().getName() + ": " + e.getMessage();
            }
            report.put(program.getKey(), text);
        }
        report.putAll(extra);
        System.out.println(json(report));
        System.out.flush();
    }

    /** {@link #printDescriptions} of programs that add nothing of their own. */
    static void printPlainDescriptions(Map<String, ? extends Consumer<StreamsBuilder>> programs) {
        Map<String, BiConsumer<StreamsBuilder, Map<String, String>>> adapted = new LinkedHashMap<>();
        programs.forEach((name, program) -> adapted.put(name, (builder, extra) -> program.accept(builder)));
        printDescriptions(adapted);
    }

}
