package dev.martlet.compat.driver;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;

/** The admin operations, on one lazily created Admin client. */
final class AdminOps implements AutoCloseable {
    /** Admin calls give up after this (default.api.timeout.ms); get() waits a little longer. */
    static final int API_TIMEOUT_MS = 30_000;
    private static final long GET_TIMEOUT_MS = API_TIMEOUT_MS + 5_000;
    /** ListOffsets gives up sooner than other calls (see listOffsets). */
    private static final int LIST_OFFSETS_TIMEOUT_MS = 10_000;

    private final ClientConfig config;
    private Admin admin;

    AdminOps(ClientConfig config) {
        this.config = config;
    }

    private Admin admin() {
        if (admin == null) {
            Properties props = config.copy();
            props.put(AdminClientConfig.CLIENT_ID_CONFIG, "martlet-compat-java-admin");
            props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
            props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, API_TIMEOUT_MS);
            admin = Admin.create(props);
        }
        return admin;
    }

    static <T> T get(KafkaFuture<T> future) throws Exception {
        return future.get(GET_TIMEOUT_MS, TimeUnit.MILLISECONDS);
    }

    private interface Call {
        void run() throws Exception;
    }

    private static String errorOf(Call call) {
        try {
            call.run();
            return "NONE";
        } catch (Exception e) {
            return ErrorNames.of(e);
        }
    }

    String createTopic(Args a) {
        String topic = a.str("topic");
        // replication factor left to the broker (-1), as the single-node brokers under test want
        NewTopic wanted = new NewTopic(topic, Optional.of(a.integer("partitions")), Optional.empty());
        wanted.configs(a.stringMap("configs"));
        return errorOf(() -> get(admin().createTopics(List.of(wanted)).all()));
    }

    String deleteTopic(Args a) {
        String topic = a.str("topic");
        return errorOf(() -> get(admin().deleteTopics(List.of(topic)).all()));
    }

    String addPartitions(Args a) {
        String topic = a.str("topic");
        NewPartitions total = NewPartitions.increaseTo(a.integer("total"));
        return errorOf(() -> get(admin().createPartitions(Map.of(topic, total)).all()));
    }

    Map<String, Object> describeTopic(Args a) {
        String topic = a.str("topic");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("error", "NONE");
        out.put("partitions", 0);
        out.put("topic_id", null);
        out.put("configs", new TreeMap<String, String>());
        try {
            TopicDescription description = get(admin().describeTopics(List.of(topic)).allTopicNames()).get(topic);
            out.put("partitions", description.partitions().size());
            Uuid id = description.topicId();
            out.put("topic_id", id == null || Uuid.ZERO_UUID.equals(id) ? null : id.toString());
        } catch (Exception e) {
            out.put("error", ErrorNames.of(e));
            return out;
        }
        try {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = get(admin().describeConfigs(List.of(resource)).all()).get(resource);
            Map<String, String> overridden = new TreeMap<>();
            for (ConfigEntry entry : config.entries()) {
                if (entry.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                    overridden.put(entry.name(), entry.value());
                }
            }
            out.put("configs", overridden);
        } catch (Exception e) {
            out.put("error", ErrorNames.of(e));
        }
        return out;
    }

    String alterTopicConfig(Args a) {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, a.str("topic"));
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry(a.str("name"), a.str("value")), AlterConfigOp.OpType.SET);
        return errorOf(() -> get(admin().incrementalAlterConfigs(Map.of(resource, List.of(op))).all()));
    }

    /** Every config of the broker with the lowest id: {error, broker, configs: {name: [value, source, read_only]}}. */
    Map<String, Object> describeBroker() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("error", "NONE");
        out.put("broker", -1);
        Map<String, List<Object>> configs = new TreeMap<>();
        out.put("configs", configs);
        try {
            int broker = Integer.MAX_VALUE;
            for (Node node : get(admin().describeCluster().nodes())) {
                broker = Math.min(broker, node.id());
            }
            out.put("broker", broker);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(broker));
            Config config = get(admin().describeConfigs(List.of(resource)).all()).get(resource);
            for (ConfigEntry entry : config.entries()) {
                configs.put(entry.name(), Arrays.asList(entry.value(), entry.source().name(), entry.isReadOnly()));
            }
        } catch (Exception e) {
            out.put("error", ErrorNames.of(e));
        }
        return out;
    }

    Map<String, Object> deleteRecords(Args a) {
        TopicPartition tp = new TopicPartition(a.str("topic"), a.integer("partition"));
        RecordsToDelete before = RecordsToDelete.beforeOffset(a.integer("before_offset"));
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            long low = get(admin().deleteRecords(Map.of(tp, before)).lowWatermarks().get(tp)).lowWatermark();
            out.put("error", "NONE");
            out.put("low_watermark", low);
        } catch (Exception e) {
            out.put("error", ErrorNames.of(e));
            out.put("low_watermark", -1L);
        }
        return out;
    }

    Map<String, Object> listOffsets(Args a) {
        TopicPartition tp = new TopicPartition(a.str("topic"), a.integer("partition"));
        OffsetSpec spec;
        var raw = a.raw("spec");
        if (raw == null) {
            throw new IllegalArgumentException("missing argument spec");
        } else if (raw.isNumber()) {
            spec = OffsetSpec.forTimestamp(raw.asLong());
        } else {
            switch (raw.asText()) {
                case "earliest": spec = OffsetSpec.earliest(); break;
                case "latest": spec = OffsetSpec.latest(); break;
                case "max_timestamp": spec = OffsetSpec.maxTimestamp(); break;
                default: throw new IllegalArgumentException("unknown offset spec " + raw);
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            // timeoutMs: a partition the topic lacks is retried until it runs out, as it would
            // for the whole default.api.timeout.ms; an answer that comes takes milliseconds
            ListOffsetsOptions options = new ListOffsetsOptions(isolation(a.str("isolation", "read_uncommitted")))
                    .timeoutMs(LIST_OFFSETS_TIMEOUT_MS);
            ListOffsetsResultInfo info = get(admin().listOffsets(Map.of(tp, spec), options).partitionResult(tp));
            out.put("error", "NONE");
            out.put("offset", info.offset());
            out.put("timestamp", info.timestamp());
        } catch (Exception e) {
            out.put("error", ErrorNames.of(e));
            out.put("offset", -1L);
            out.put("timestamp", -1L);
        }
        return out;
    }

    private static IsolationLevel isolation(String name) {
        switch (name) {
            case "read_uncommitted": return IsolationLevel.READ_UNCOMMITTED;
            case "read_committed": return IsolationLevel.READ_COMMITTED;
            default: throw new IllegalArgumentException("unknown isolation level " + name);
        }
    }

    Map<String, Long> committed(Args a) throws Exception {
        String group = a.str("group");
        String topic = a.str("topic");
        List<TopicPartition> partitions = new ArrayList<>();
        for (Integer p : a.integersOrNull("partitions")) {
            partitions.add(new TopicPartition(topic, p));
        }
        ListConsumerGroupOffsetsSpec spec = new ListConsumerGroupOffsetsSpec().topicPartitions(partitions);
        Map<TopicPartition, OffsetAndMetadata> offsets =
                get(admin().listConsumerGroupOffsets(Map.of(group, spec)).partitionsToOffsetAndMetadata(group));
        Map<String, Long> out = new LinkedHashMap<>();
        for (TopicPartition tp : partitions) {
            OffsetAndMetadata committed = offsets.get(tp);
            out.put(Integer.toString(tp.partition()), committed == null ? -1L : committed.offset());
        }
        return out;
    }

    @Override
    public void close() {
        if (admin != null) {
            admin.close(java.time.Duration.ofSeconds(5));
            admin = null;
        }
    }
}
