package dev.martlet.compat.driver;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions kept open across requests, one transactional KafkaProducer per handle:
 * transaction_begin (init, begin), transaction_send (send and flush), transaction_end
 * (commit or abort, then close).
 */
final class Transactions implements AutoCloseable {
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(5);

    private final ClientOps clients;
    private final Map<String, KafkaProducer<String, String>> open = new LinkedHashMap<>();

    Transactions(ClientOps clients) {
        this.clients = clients;
    }

    String begin(Args a) {
        String handle = a.str("handle");
        if (open.containsKey(handle)) {
            throw new IllegalArgumentException("transaction " + handle + " is open already");
        }
        Properties props = clients.producerProps();
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.str("transactional_id"));
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60_000);
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        open.put(handle, producer);
        try {
            producer.initTransactions();
            producer.beginTransaction();
            return "NONE";
        } catch (Exception e) {
            return ErrorNames.of(e);
        }
    }

    List<Map<String, Object>> send(Args a) {
        KafkaProducer<String, String> producer = producer(a.str("handle"));
        String topic = a.str("topic");
        List<ProducerRecord<String, String>> wanted = new ArrayList<>();
        for (JsonNode record : a.array("records")) {
            wanted.add(Records.toProducer(topic, record));
        }
        List<Future<RecordMetadata>> sent = ClientOps.sendAll(producer, wanted);
        producer.flush();
        return ClientOps.collect(sent, wanted);
    }

    String end(Args a) {
        String handle = a.str("handle");
        KafkaProducer<String, String> producer = producer(handle);
        open.remove(handle);
        try {
            if (a.bool("commit", true)) {
                producer.commitTransaction();
            } else {
                producer.abortTransaction();
            }
            return "NONE";
        } catch (Exception e) {
            return ErrorNames.of(e);
        } finally {
            producer.close(CLOSE_TIMEOUT);
        }
    }

    private KafkaProducer<String, String> producer(String handle) {
        KafkaProducer<String, String> producer = open.get(handle);
        if (producer == null) {
            throw new IllegalArgumentException("no transaction " + handle + " is open");
        }
        return producer;
    }

    @Override
    public void close() {
        for (KafkaProducer<String, String> producer : open.values()) {
            try {
                producer.close(Duration.ofSeconds(2));
            } catch (Exception ignored) {
                // the JVM is ending
            }
        }
        open.clear();
    }
}
