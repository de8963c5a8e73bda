package dev.martlet.compat.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Counts words with exactly-once processing: lines from the input topic are split into words,
 * regrouped by word (a repartition topic), counted in a state store whose changelog is a
 * compacted topic, and each new count goes to the output topic as (word, count as a long):
 * with no record cache, every count of a word, one after another.
 *
 * <p>Usage: {@code WordCount <bootstrap> <application.id> <input topic> <output topic> <state dir>}.
 * Runs until SIGTERM (closes cleanly) or SIGKILL. stdout carries one line per state change,
 * {@code STATE <name>}, for the test to follow; logs go to stderr. Exits 1 when a stream
 * thread dies (the exception is on stderr).
 */
public final class WordCount {
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);

    private WordCount() {
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5) {
            System.err.println("usage: WordCount <bootstrap> <application.id> <input> <output> <state dir>");
            System.exit(2);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]), config(args[0], args[1], args[4]));
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            System.err.println("stream thread died: " + error);
            error.printStackTrace(System.err);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(CLOSE_TIMEOUT), "close-on-sigterm"));
        streams.start();
        stopped.await();
        // SHUTDOWN_CLIENT ends in ERROR; a close from the hook ends in NOT_RUNNING
        boolean failed = streams.state() == KafkaStreams.State.ERROR;
        streams.close(CLOSE_TIMEOUT);
        if (failed) {
            System.exit(1);
        }
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Properties config(String bootstrap, String applicationId, String stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // No record cache: every word updates the store's changelog and the output at once,
        // so each count 1, 2, 3, ... of a word is written, and a kill always finds work that
        // is written but not committed (without exactly-once it would then be counted twice).
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A member killed with -9 leaves the group only when its session expires: keep that
        // short (the brokers' minimum) so a restarted instance is not held up for 45 s.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        return props;
    }
}
