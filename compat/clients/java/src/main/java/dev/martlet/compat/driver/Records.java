package dev.martlet.compat.driver;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** Records between the JSON shapes of compat/clients/base.py and the Java client's. */
final class Records {
    private Records() {
    }

    static ProducerRecord<String, String> toProducer(String topic, JsonNode record) {
        List<Header> headers = new ArrayList<>();
        JsonNode pairs = record.get("headers");
        if (pairs != null && pairs.isArray()) {
            for (JsonNode pair : pairs) {
                JsonNode value = pair.get(1);
                byte[] bytes = value == null || value.isNull() ? null : value.asText().getBytes(StandardCharsets.UTF_8);
                headers.add(new RecordHeader(pair.get(0).asText(), bytes));
            }
        }
        return new ProducerRecord<>(topic, intOrNull(record, "partition"), longOrNull(record, "timestamp"),
                textOrNull(record, "key"), textOrNull(record, "value"), headers);
    }

    static Map<String, Object> consumed(ConsumerRecord<String, String> record, boolean withTopic) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (withTopic) {
            out.put("topic", record.topic());
        }
        out.put("partition", record.partition());
        out.put("offset", record.offset());
        out.put("key", record.key());
        out.put("value", record.value());
        List<List<String>> headers = new ArrayList<>();
        for (Header header : record.headers()) {
            byte[] value = header.value();
            List<String> pair = new ArrayList<>(2);
            pair.add(header.key());
            pair.add(value == null ? null : new String(value, StandardCharsets.UTF_8));
            headers.add(pair);
        }
        out.put("headers", headers);
        out.put("timestamp", record.timestamp());
        out.put("timestamp_type", record.timestampType().name);
        return out;
    }

    private static String textOrNull(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asText();
    }

    private static Integer intOrNull(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asInt();
    }

    private static Long longOrNull(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asLong();
    }
}
