// One instance of benches/bench_failover.py's count under group.protocol=streams (KIP-1071), for
// the failover benchmark's Kafka Streams 4.4 anchor. The Python driver starts two of them, kills
// one with SIGKILL and reads the survivor's status lines.
//
// The program is the same DSL program as streamstate's (tests/integration/test_standby_tasks.py,
// `_count_topology`): stream(input, String, String).groupByKey().count(Materialized.as("counts"))
// .toStream().to(output, Long), so the changelog is `<application.id>-counts-changelog`.
// Settings are BenchSupport's, except what the scenario fixes: group.protocol=streams, a dynamic
// member (no group.instance.id: a killed member's tasks move when its session expires, as the
// streamstate instances'), commit.interval.ms=200 as the streamstate instances commit.
// `--standbys N` sets the *group* config streams.num.standby.replicas (Kafka Streams ignores its
// own num.standby.replicas under this protocol; see docs/rebalancing.md). `--keep-state true`
// restarts on the state directory a previous instance left; SIGTERM closes the instance (its
// shutdown hook), as a rolling bounce does.
//
// Output on stdout, one JSON object per line:
//   {"t": epoch ms, "state", "active": [partitions], "standby": [partitions], "restoring": restores
//    in flight, "restored": changelog records restored since start, "committed": the sum of the
//    committed input offsets of this instance's active tasks, "standby_lag": the sum of the
//    changelog lag of its standby stores (-1 when unknown)}
// whenever one of these fields changes (checked every 10 ms; the lag every 500 ms), and
// {"stored": N} after the driver writes "count" on stdin (every key in the store, iterated).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.LagInfo;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

public final class FailoverInstance {
    private FailoverInstance() {}

    public static void main(String[] argv) {
        BenchSupport.main("FailoverInstance", argv, FailoverInstance::run);
    }

    /** Restores in flight and records restored, from Kafka Streams' restore listener. */
    private static final class Restores implements StateRestoreListener {
        final AtomicLong inFlight = new AtomicLong();
        final AtomicLong records = new AtomicLong();

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            inFlight.incrementAndGet();
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long end, long restored) {
            records.addAndGet(restored);
        }

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            inFlight.decrementAndGet();
        }

        @Override
        public void onRestoreSuspended(TopicPartition tp, String store, long restored) {
            inFlight.decrementAndGet();
        }
    }

    private static void run(BenchSupport.Args args) throws Exception {
        String applicationId = args.required("application-id");
        // --keep-state true: a restart on the state directory a previous instance left (a
        // bounce), instead of BenchSupport's fresh, empty one.
        Path stateDir =
                args.optional("keep-state", "false").equals("true")
                        ? Path.of(args.required("state-dir"))
                        : BenchSupport.freshStateDir(args);
        Properties props = BenchSupport.streamsConfig(args, applicationId, stateDir);
        props.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        long standbys = args.number("standbys", 0);
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", args.required("bootstrap")))) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, applicationId);
            AlterConfigOp set =
                    new AlterConfigOp(
                            new ConfigEntry("streams.num.standby.replicas", Long.toString(standbys)),
                            AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(group, List.of(set))).all().get();
        }
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args.required("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.as("counts"))
                .toStream()
                .to(args.required("output"), Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        BenchSupport.Watch watch = new BenchSupport.Watch(streams);
        Restores restores = new Restores();
        streams.setGlobalStateRestoreListener(restores);
        // SIGTERM closes the instance as a user's shutdown hook does (a bounce); SIGKILL does not.
        Runtime.getRuntime()
                .addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(60)), "close"));
        streams.start();
        Thread commands = new Thread(() -> answer(streams), "failover-commands");
        commands.setDaemon(true);
        commands.start();
        String last = "";
        long lag = -1;
        long lagAt = 0;
        while (true) {
            KafkaStreams.State state = streams.state();
            if (state == KafkaStreams.State.PENDING_SHUTDOWN
                    || state == KafkaStreams.State.NOT_RUNNING) {
                Thread.sleep(10); // closing: the shutdown hook ends the process
                continue;
            }
            watch.check();
            Map<String, Object> status = new LinkedHashMap<>();
            TreeSet<Integer> active = new TreeSet<>();
            TreeSet<Integer> standby = new TreeSet<>();
            long committed = 0;
            for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : thread.activeTasks()) {
                    active.add(task.taskId().partition());
                    for (long offset : task.committedOffsets().values()) {
                        committed += Math.max(offset, 0);
                    }
                }
                for (TaskMetadata task : thread.standbyTasks()) {
                    standby.add(task.taskId().partition());
                }
            }
            long now = System.currentTimeMillis();
            if (now - lagAt >= 500) {
                lag = standbyLag(streams, standby);
                lagAt = now;
            }
            status.put("state", streams.state().toString());
            status.put("active", active.toString());
            status.put("standby", standby.toString());
            status.put("restoring", restores.inFlight.get());
            status.put("restored", restores.records.get());
            status.put("committed", committed);
            status.put("standby_lag", lag);
            String line = BenchSupport.json(status);
            if (!line.equals(last)) {
                last = line;
                Map<String, Object> stamped = new LinkedHashMap<>();
                stamped.put("t", now);
                stamped.putAll(status);
                System.out.println(BenchSupport.json(stamped));
                System.out.flush();
            }
            Thread.sleep(10);
        }
    }

    /** The sum of the changelog lags of this instance's standby partitions; -1 when one is not
     *  known yet. */
    private static long standbyLag(KafkaStreams streams, TreeSet<Integer> standby) {
        if (standby.isEmpty()) {
            return -1;
        }
        Map<Integer, LagInfo> lags;
        try {
            lags = new LinkedHashMap<>();
            for (Map.Entry<Integer, LagInfo> e :
                    streams.allLocalStorePartitionLags().getOrDefault("counts", Map.of()).entrySet()) {
                lags.put(e.getKey(), e.getValue());
            }
        } catch (RuntimeException e) {
            return -1; // a rebalance in progress: asked again in 500 ms
        }
        long sum = 0;
        for (int partition : standby) {
            LagInfo info = lags.get(partition);
            if (info == null) {
                return -1;
            }
            sum += info.offsetLag();
        }
        return sum;
    }

    /** Answers the driver's "count" lines with the number of keys in the local active store. */
    private static void answer(KafkaStreams streams) {
        try (BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (!line.trim().equals("count")) {
                    continue;
                }
                ReadOnlyKeyValueStore<String, Long> store =
                        streams.store(
                                StoreQueryParameters.fromNameAndType(
                                        "counts", QueryableStoreTypes.keyValueStore()));
                long stored = 0;
                try (KeyValueIterator<String, Long> all = store.all()) {
                    while (all.hasNext()) {
                        KeyValue<String, Long> entry = all.next();
                        if (entry.value != null) {
                            stored++;
                        }
                    }
                }
                System.out.println(BenchSupport.json(Map.of("stored", stored)));
                System.out.flush();
            }
        } catch (Exception e) {
            System.err.println("FailoverInstance: answering failed: " + e);
        }
    }
}
