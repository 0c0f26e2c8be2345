// Kafka Streams restoring a persistent (RocksDB) key-value store from its pre-filled changelog,
// as it does after a failover onto an empty state directory.
//
//   java RestoreBench --bootstrap HOST:PORT --application-id APP --store STORE
//                     --state-dir EMPTY_DIR [--input-topic APP-input] [--probe-keys HEX,HEX...]
//                     [--timeout-ms 600000] [--config key=value ...]
//
// The topology (Processor API): a source on the input topic (which must exist, with as many
// partitions as the changelog, and may be empty), one processor writing each record to the
// store, and the store, logged to `APP-STORE-changelog`. That changelog must already hold the
// records; with no checkpoint in the fresh state directory, Kafka Streams restores every
// partition from its beginning before the task runs. Settings: see BenchSupport.java.
//
// Prints one JSON line on stdout once every restoration has ended and the instance is RUNNING:
//   restore_s            from the StateRestoreListener's first onRestoreStart to its last
//                        onRestoreEnd (what the benchmark compares)
//   restore_cpu_s        the process's CPU time over that span (all threads)
//   start_to_running_s   from KafkaStreams.start() to the state RUNNING
//   restored             the sum of onRestoreEnd's totalRestored over the partitions
//   partitions_restored  how many partitions' restorations ended
//   batches              onBatchRestored calls
//   approximate_entries  the store's approximateNumEntries() (RocksDB's estimate) once RUNNING
//   probes               {key hex: the store's value (hex) or null} for each of --probe-keys
//   peak_rss_mb          the process's peak resident set size (VmHWM: heap, RocksDB's native
//                        memory, everything), read once RUNNING
//   close_s              how long close() took
// and the Kafka Streams version. Exits 1 with a message on stderr if anything fails.

import com.sun.management.OperatingSystemMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class RestoreBench {
    private RestoreBench() {}

    /** Writes each input record to the store (and so to its changelog). */
    static final class PutProcessor implements Processor<byte[], byte[], Void, Void> {
        private final String storeName;
        private KeyValueStore<Bytes, byte[]> store;

        PutProcessor(String storeName) {
            this.storeName = storeName;
        }

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            store = context.getStateStore(storeName);
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            if (record.key() != null) {
                store.put(Bytes.wrap(record.key()), record.value());
            }
        }
    }

    /**
     * The restoration's timing and counts, as the restore (state updater) threads report them:
     * wall time and this process's CPU time (every thread: restore, JIT, GC, RocksDB's
     * background flushes) from the first onRestoreStart to the last onRestoreEnd.
     */
    static final class RestoreTiming implements StateRestoreListener {
        private static final OperatingSystemMXBean OS =
                (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        private long firstStart;
        private long lastEnd;
        private long cpuAtFirstStart;
        private long cpuAtLastEnd;
        private long restored;
        private long batches;
        private int started;
        private int ended;

        @Override
        public synchronized void onRestoreStart(TopicPartition tp, String store, long startOffset, long endOffset) {
            if (started == 0) {
                firstStart = System.nanoTime();
                cpuAtFirstStart = OS.getProcessCpuTime();
            }
            started += 1;
        }

        @Override
        public synchronized void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {
            batches += 1;
        }

        @Override
        public synchronized void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
            restored += totalRestored;
            ended += 1;
            lastEnd = System.nanoTime();
            cpuAtLastEnd = OS.getProcessCpuTime();
        }

        /** Some restoration started, and every one that started has ended. */
        synchronized boolean done() {
            return started > 0 && ended == started;
        }

        synchronized void report(Map<String, Object> out) {
            out.put("restore_s", BenchSupport.seconds(firstStart, lastEnd));
            out.put("restore_cpu_s", BenchSupport.seconds(cpuAtFirstStart, cpuAtLastEnd));
            out.put("restored", restored);
            out.put("partitions_restored", ended);
            out.put("batches", batches);
        }
    }

    /** The process's peak RSS in MB (Linux's VmHWM), or -1 where /proc has none. */
    static double peakRssMb() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    String kb = line.substring("VmHWM:".length()).trim().split("\\s+")[0];
                    return Long.parseLong(kb) / 1024.0;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    public static void main(String[] argv) {
        BenchSupport.main("RestoreBench", argv, RestoreBench::run);
    }

    static void run(BenchSupport.Args args) throws Exception {
        String applicationId = args.required("application-id");
        String storeName = args.required("store");
        String inputTopic = args.optional("input-topic", applicationId + "-input");
        String probeKeys = args.optional("probe-keys", "");
        long timeoutMs = args.number("timeout-ms", 600_000L);
        Path stateDir = BenchSupport.freshStateDir(args);
        Properties props = BenchSupport.streamsConfig(args, applicationId, stateDir);

        Topology topology = new Topology();
        topology.addSource("source", new ByteArrayDeserializer(), new ByteArrayDeserializer(), inputTopic);
        topology.addProcessor("put", () -> new PutProcessor(storeName), "source");
        topology.addStateStore(
                Stores.keyValueStoreBuilder(
                                Stores.persistentKeyValueStore(storeName), Serdes.Bytes(), Serdes.ByteArray())
                        .withLoggingEnabled(Map.of()),
                "put");

        RestoreTiming timing = new RestoreTiming();
        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setGlobalStateRestoreListener(timing);
        BenchSupport.Watch watch = new BenchSupport.Watch(streams);

        long startedAt = System.nanoTime();
        Map<String, Object> report = new LinkedHashMap<>();
        try {
            streams.start();
            BenchSupport.await(
                    "the restoration to end and the instance to run",
                    () -> watch.running() && timing.done(),
                    watch,
                    timeoutMs,
                    5); // the listener's own timestamps are reported, not this poll's
            ReadOnlyKeyValueStore<Bytes, byte[]> store =
                    streams.store(
                            StoreQueryParameters.fromNameAndType(
                                    storeName, QueryableStoreTypes.<Bytes, byte[]>keyValueStore()));
            Map<String, Object> probes = new LinkedHashMap<>();
            for (String probeKey : probeKeys.split(",")) {
                if (!probeKey.isEmpty()) {
                    byte[] value = store.get(Bytes.wrap(HexFormat.of().parseHex(probeKey)));
                    probes.put(probeKey, value == null ? null : HexFormat.of().formatHex(value));
                }
            }
            report.put("program", "RestoreBench");
            report.put("kafka_streams_version", BenchSupport.kafkaStreamsVersion());
            timing.report(report);
            report.put("start_to_running_s", BenchSupport.seconds(startedAt, watch.runningAt()));
            report.put("approximate_entries", store.approximateNumEntries());
            report.put("probes", probes);
            report.put("peak_rss_mb", peakRssMb());
        } finally {
            report.put("close_s", BenchSupport.close(streams));
        }
        System.out.println(BenchSupport.json(report));
        System.out.flush();
    }
}
