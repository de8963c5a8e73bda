package dev.martlet.compat.driver;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** produce, consume (by assignment) and transaction: a fresh client per call, closed after it. */
final class ClientOps {
    /** How long send() may wait for metadata or buffer space. */
    static final int MAX_BLOCK_MS = 10_000;
    static final int REQUEST_TIMEOUT_MS = 10_000;
    static final int DELIVERY_TIMEOUT_MS = 30_000;
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);

    private final ClientConfig config;
    private int serial;

    ClientOps(ClientConfig config) {
        this.config = config;
    }

    Properties producerProps() {
        Properties props = config.copy();
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "martlet-compat-java-producer-" + (++serial));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, MAX_BLOCK_MS);
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, DELIVERY_TIMEOUT_MS);
        return props;
    }

    List<Map<String, Object>> produce(Args a) {
        String topic = a.str("topic");
        JsonNode records = a.array("records");
        Properties props = producerProps();
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.str("codec", "none"));
        props.put(ProducerConfig.ACKS_CONFIG, a.str("acks", "all"));
        // set either way: the Java client's own default is true
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(a.bool("idempotent", false)));
        Integer maxRequest = a.integer("max_request_bytes", null);
        if (maxRequest != null) {
            props.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, maxRequest);
        }
        List<ProducerRecord<String, String>> wanted = new ArrayList<>();
        for (JsonNode record : records) {
            wanted.add(Records.toProducer(topic, record));
        }
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        try {
            try {
                // Each send() to a topic without metadata would block for max.block.ms in turn;
                // ask once, and when that fails every record fails with the same error.
                producer.partitionsFor(topic);
            } catch (Exception e) {
                String error = ErrorNames.of(e);
                List<Map<String, Object>> out = new ArrayList<>();
                for (ProducerRecord<String, String> record : wanted) {
                    out.add(answer(error, record.partition() == null ? -1 : record.partition(), -1));
                }
                return out;
            }
            List<Future<RecordMetadata>> sent = sendAll(producer, wanted);
            producer.flush();
            return collect(sent, wanted);
        } finally {
            producer.close(CLOSE_TIMEOUT);
        }
    }

    static List<Future<RecordMetadata>> sendAll(KafkaProducer<String, String> producer,
                                                        List<ProducerRecord<String, String>> records) {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        // send() to a partition missing from the metadata blocks for max.block.ms, then fails
        // with a TimeoutException; later records for that partition fail the same way at once
        // instead of blocking in turn (key -1: records the partitioner places)
        Map<Integer, Throwable> blocked = new HashMap<>();
        for (ProducerRecord<String, String> record : records) {
            int key = record.partition() == null ? -1 : record.partition();
            Throwable earlier = blocked.get(key);
            if (earlier != null) {
                sent.add(CompletableFuture.failedFuture(earlier));
                continue;
            }
            Future<RecordMetadata> future;
            try {
                future = producer.send(record);
            } catch (Exception e) {
                future = CompletableFuture.failedFuture(e);
            }
            sent.add(future);
            if (future.isDone()) {
                try {
                    future.get();
                } catch (Exception e) {
                    Throwable cause = ErrorNames.unwrap(e);
                    if (cause instanceof TimeoutException) {
                        blocked.put(key, cause);
                    }
                }
            }
        }
        return sent;
    }

    static List<Map<String, Object>> collect(List<Future<RecordMetadata>> sent,
                                                     List<ProducerRecord<String, String>> records) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (int i = 0; i < sent.size(); i++) {
            try {
                RecordMetadata metadata = sent.get(i).get();
                out.add(answer("NONE", metadata.partition(), metadata.hasOffset() ? metadata.offset() : -1));
            } catch (Exception e) {
                Integer partition = records.get(i).partition();
                out.add(answer(ErrorNames.of(e), partition == null ? -1 : partition, -1));
            }
        }
        return out;
    }

    private static Map<String, Object> answer(String error, int partition, long offset) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("error", error);
        out.put("partition", partition);
        out.put("offset", offset);
        return out;
    }

    List<Map<String, Object>> consume(Args a) {
        String topic = a.str("topic");
        List<Integer> partitions = a.integersOrNull("partitions");
        JsonNode from = a.raw("from_offset");
        int maxRecords = a.integer("max_records");
        long deadline = System.nanoTime() + (long) (a.number("timeout_s") * 1e9);
        List<Map<String, Object>> out = new ArrayList<>();
        KafkaConsumer<String, String> consumer = consumer(a.str("isolation", "read_uncommitted"), null);
        try {
            List<TopicPartition> assigned = new ArrayList<>();
            if (partitions == null) {
                List<PartitionInfo> infos = consumer.partitionsFor(topic, remaining(deadline, 1_000));
                for (PartitionInfo info : infos == null ? List.<PartitionInfo>of() : infos) {
                    assigned.add(new TopicPartition(topic, info.partition()));
                }
            } else {
                for (Integer p : partitions) {
                    assigned.add(new TopicPartition(topic, p));
                }
            }
            if (assigned.isEmpty()) {
                return out;
            }
            consumer.assign(assigned);
            seek(consumer, assigned, from);
            while (out.size() < maxRecords) {
                Duration left = remaining(deadline, 0);
                if (left.isZero()) {
                    break;
                }
                for (ConsumerRecord<String, String> record : consumer.poll(left)) {
                    if (out.size() < maxRecords) {
                        out.add(Records.consumed(record, false));
                    }
                }
            }
            return out;
        } finally {
            consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
    }

    /** A consumer of assigned partitions; with a group it may commit, and never does by itself. */
    private KafkaConsumer<String, String> consumer(String isolation, String group) {
        Properties props = config.copy();
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "martlet-compat-java-consumer-" + (++serial));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static void seek(KafkaConsumer<String, String> consumer, List<TopicPartition> assigned, JsonNode from) {
        if (from == null || "earliest".equals(from.asText())) {
            consumer.seekToBeginning(assigned);
        } else if ("latest".equals(from.asText())) {
            consumer.seekToEnd(assigned);
        } else if (from.canConvertToLong()) {
            for (TopicPartition tp : assigned) {
                consumer.seek(tp, from.asLong());
            }
        } else {
            throw new IllegalArgumentException("from_offset must be earliest, latest or an offset: " + from);
        }
    }

    /**
     * Poll one assigned partition until the position reaches until_offset (or timeout_s);
     * with a group, commitSync() of what was consumed: {records, position, commit}.
     */
    Map<String, Object> consumePosition(Args a) {
        TopicPartition tp = new TopicPartition(a.str("topic"), a.integer("partition"));
        long until = a.raw("until_offset") == null ? Long.MAX_VALUE : a.raw("until_offset").asLong();
        long deadline = System.nanoTime() + (long) (a.number("timeout_s") * 1e9);
        String group = a.str("group", null);
        List<Map<String, Object>> records = new ArrayList<>();
        KafkaConsumer<String, String> consumer = consumer(a.str("isolation", "read_uncommitted"), group);
        try {
            consumer.assign(List.of(tp));
            seek(consumer, List.of(tp), a.raw("from_offset"));
            long position = -1;
            while (position < until && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    records.add(Records.consumed(record, false));
                }
                position = consumer.position(tp, Duration.ofSeconds(10));
            }
            String commit = null;
            if (group != null) {
                try {
                    consumer.commitSync(Duration.ofSeconds(30));
                    commit = "NONE";
                } catch (Exception e) {
                    commit = ErrorNames.of(e);
                }
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("records", records);
            out.put("position", position);
            out.put("commit", commit);
            return out;
        } finally {
            consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
        }
    }

    private static Duration remaining(long deadlineNanos, long atLeastMs) {
        long ms = Math.max(atLeastMs, (deadlineNanos - System.nanoTime()) / 1_000_000);
        return Duration.ofMillis(Math.max(ms, 0));
    }

    String transaction(Args a) {
        String topic = a.str("topic");
        JsonNode records = a.array("records");
        boolean commit = a.bool("commit", true);
        Properties props = producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.str("transactional_id"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60_000);
        List<ProducerRecord<String, String>> wanted = new ArrayList<>();
        for (JsonNode record : records) {
            wanted.add(Records.toProducer(topic, record));
        }
        KafkaProducer<String, String> producer = null;
        boolean begun = false;
        String first = "NONE";
        try {
            producer = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
            producer.initTransactions();
            producer.beginTransaction();
            begun = true;
            List<Future<RecordMetadata>> sent = sendAll(producer, wanted);
            producer.flush();
            for (Map<String, Object> result : collect(sent, wanted)) {
                if (!"NONE".equals(result.get("error"))) {
                    first = (String) result.get("error");
                    break;
                }
            }
            if ("NONE".equals(first) && commit) {
                producer.commitTransaction();
            } else {
                begun = false;
                producer.abortTransaction();
            }
        } catch (Exception e) {
            if ("NONE".equals(first)) {
                first = ErrorNames.of(e);
            }
            if (begun) {
                try {
                    producer.abortTransaction();
                } catch (Exception ignored) {
                    // the producer is already failed; the first error is what counts
                }
            }
        } finally {
            if (producer != null) {
                producer.close(CLOSE_TIMEOUT);
            }
        }
        return first;
    }
}
