// The canonical Kafka Streams word count, run until it has counted N input lines.
//
//   java WordCount --bootstrap HOST:PORT --application-id APP --input-topic IN --sink-topic OUT
//                  --lines N --state-dir EMPTY_DIR [--timeout-ms 600000] [--config key=value ...]
//
// The topology (DSL): text lines (String values) from IN -> words (the line lowercased, split on
// whitespace, empty strings dropped) -> re-keyed by word through the repartition topic
// `APP-words-repartition` -> counted in the logged persistent (RocksDB) store `counts`
// (changelog `APP-counts-changelog`) -> OUT, word -> count as decimal text (String serde).
// Kafka Streams creates both internal topics; IN and OUT must exist. Settings: see
// BenchSupport.java (its record cache means OUT receives the latest count of each word at
// every commit, not every intermediate count; the last record per word is its final count).
//
// "Done" is when N lines have been read and the counts in the store add up to the number of
// words those lines hold, so every word has gone through the repartition topic and been counted.
// Then close() flushes the cache to OUT and the changelog and commits. Prints one JSON line:
//   elapsed_s            from KafkaStreams.start() to done (what the benchmark compares)
//   start_to_running_s   from start() to the state RUNNING
//   processing_s         from RUNNING to done
//   close_s              how long close() took (flushing the last counts to OUT)
//   lines, words         lines read and words they held
//   distinct_words, total_count
//                        the store's number of keys and the sum of its counts at done
// and the Kafka Streams version. Exits 1 with a message on stderr if anything fails.

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

public final class WordCount {
    private WordCount() {}

    static final String STORE = "counts";
    static final String REPARTITION = "words";

    /** The words of a line: lowercased, split on whitespace, without empty strings. */
    static List<String> words(String line) {
        List<String> words = new ArrayList<>();
        if (line != null) {
            for (String word : line.toLowerCase(Locale.ROOT).split("\\s+")) {
                if (!word.isEmpty()) {
                    words.add(word);
                }
            }
        }
        return words;
    }

    public static void main(String[] argv) {
        BenchSupport.main("WordCount", argv, WordCount::run);
    }

    static void run(BenchSupport.Args args) throws Exception {
        String applicationId = args.required("application-id");
        String inputTopic = args.required("input-topic");
        String sinkTopic = args.required("sink-topic");
        long lines = args.number("lines", -1);
        if (lines < 0) {
            throw new IllegalArgumentException("missing --lines");
        }
        long timeoutMs = args.number("timeout-ms", 600_000L);
        Path stateDir = BenchSupport.freshStateDir(args);
        Properties props = BenchSupport.streamsConfig(args, applicationId, stateDir);

        // Written by the stream thread: words first, then lines, so that a reader who sees
        // `linesRead == N` also sees the words of line N.
        AtomicLong linesRead = new AtomicLong();
        AtomicLong wordsRead = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(inputTopic, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(
                        line -> {
                            List<String> words = words(line);
                            wordsRead.addAndGet(words.size());
                            linesRead.incrementAndGet();
                            return words;
                        })
                .groupBy((key, word) -> word, Grouped.with(REPARTITION, Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(sinkTopic, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        BenchSupport.Watch watch = new BenchSupport.Watch(streams);

        long[] totals = new long[2]; // distinct words, sum of counts, at done
        long startedAt = System.nanoTime();
        long doneAt;
        Map<String, Object> report = new LinkedHashMap<>();
        try {
            streams.start();
            BenchSupport.await(
                    lines + " lines to be counted",
                    () -> {
                        if (linesRead.get() < lines || !watch.running()) {
                            return false;
                        }
                        long words = wordsRead.get();
                        if (!sumCounts(streams, totals)) {
                            return false;
                        }
                        return totals[1] == words;
                    },
                    watch,
                    timeoutMs,
                    10); // each poll past N lines iterates the store: not too often
            doneAt = System.nanoTime();
            report.put("program", "WordCount");
            report.put("kafka_streams_version", BenchSupport.kafkaStreamsVersion());
            report.put("elapsed_s", BenchSupport.seconds(startedAt, doneAt));
            report.put("start_to_running_s", BenchSupport.seconds(startedAt, watch.runningAt()));
            report.put("processing_s", BenchSupport.seconds(watch.runningAt(), doneAt));
            report.put("lines", linesRead.get());
            report.put("words", wordsRead.get());
            report.put("distinct_words", totals[0]);
            report.put("total_count", totals[1]);
        } finally {
            report.put("close_s", BenchSupport.close(streams));
        }
        System.out.println(BenchSupport.json(report));
        System.out.flush();
    }

    /** Reads the store (interactive query): distinct words and the sum of the counts; false
     *  while the store cannot be queried (a rebalance). */
    private static boolean sumCounts(KafkaStreams streams, long[] totals) {
        try {
            ReadOnlyKeyValueStore<String, Long> store =
                    streams.store(
                            StoreQueryParameters.fromNameAndType(
                                    STORE, QueryableStoreTypes.<String, Long>keyValueStore()));
            long distinct = 0;
            long sum = 0;
            try (KeyValueIterator<String, Long> all = store.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    distinct += 1;
                    sum += entry.value;
                }
            }
            totals[0] = distinct;
            totals[1] = sum;
            return true;
        } catch (InvalidStateStoreException e) {
            return false;
        }
    }
}
