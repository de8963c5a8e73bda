package dev.martlet.compat.driver;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Long-lived consumers, one KafkaConsumer per handle: group members (subscribed) and readers
 * (assigned partitions, no group), polled alike.
 */
final class Members implements AutoCloseable {
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(15);
    private static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(30);

    private static final class Member implements ConsumerRebalanceListener {
        final KafkaConsumer<String, String> consumer;
        long revoked;

        Member(Properties props) {
            consumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked += partitions.size();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        }
    }

    private final ClientConfig config;
    private final Map<String, Member> members = new LinkedHashMap<>();

    Members(ClientConfig config) {
        this.config = config;
    }

    void start(Args a) {
        String handle = a.str("handle");
        if (members.containsKey(handle)) {
            throw new IllegalArgumentException("member " + handle + " is already started");
        }
        String protocol = a.str("protocol", "classic");
        String assignor = a.str("assignor", null);
        int sessionTimeoutMs = a.integer("session_timeout_ms", 10_000);
        Properties props = config.copy();
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "martlet-compat-java-member-" + handle);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, a.str("group"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        String instanceId = a.str("instance_id", null);
        if (instanceId != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        switch (protocol) {
            case "classic":
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
                props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionTimeoutMs);
                int heartbeatMs = Math.max(100, Math.min(3_000, sessionTimeoutMs / 3));
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, heartbeatMs);
                if (assignor != null) {
                    props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, classicAssignor(assignor));
                }
                break;
            case "consumer":
                // KIP-848: the broker assigns and owns the session timeout; the client may only
                // name a server-side assignor, and refuses session.timeout.ms
                props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                if (assignor != null) {
                    if (!assignor.equals("range") && !assignor.equals("uniform")) {
                        throw new Unsupported("group.protocol=consumer takes only a server-side assignor "
                                + "(range, uniform), not " + assignor);
                    }
                    props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
                }
                break;
            default:
                throw new IllegalArgumentException("unknown group protocol " + protocol);
        }
        Member member = new Member(props);
        try {
            member.consumer.subscribe(a.strings("topics"), member);
        } catch (RuntimeException e) {
            member.consumer.close(CloseOptions.timeout(Duration.ZERO));
            throw e;
        }
        members.put(handle, member);
    }

    /**
     * A consumer of fixed partitions with no group, from the earliest offset: it lives across
     * broker restarts and keeps its position, as a stream processor's reader does.
     */
    void startReader(Args a) {
        String handle = a.str("handle");
        if (members.containsKey(handle)) {
            throw new IllegalArgumentException("member " + handle + " is already started");
        }
        Properties props = config.copy();
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "martlet-compat-java-reader-" + handle);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        Member member = new Member(props);
        List<TopicPartition> partitions = new ArrayList<>();
        for (int partition : a.integersOrNull("partitions")) {
            partitions.add(new TopicPartition(a.str("topic"), partition));
        }
        member.consumer.assign(partitions);
        members.put(handle, member);
    }

    private static String classicAssignor(String name) {
        switch (name) {
            case "range": return RangeAssignor.class.getName();
            case "roundrobin": return RoundRobinAssignor.class.getName();
            case "sticky": return StickyAssignor.class.getName();
            case "cooperative-sticky": return CooperativeStickyAssignor.class.getName();
            default: throw new Unsupported("the Java client has no assignor named " + name);
        }
    }

    private Member member(Args a) {
        String handle = a.str("handle");
        Member member = members.get(handle);
        if (member == null) {
            throw new IllegalArgumentException("no member " + handle + " is started");
        }
        return member;
    }

    Map<String, Object> poll(Args a) {
        Member member = member(a);
        long timeoutMs = Math.max(0L, (long) (a.number("timeout_s") * 1000));
        List<Map<String, Object>> records = new ArrayList<>();
        for (ConsumerRecord<String, String> record : member.consumer.poll(Duration.ofMillis(timeoutMs))) {
            records.add(Records.consumed(record, true));
        }
        List<TopicPartition> assigned = new ArrayList<>(member.consumer.assignment());
        assigned.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        List<List<Object>> assignment = new ArrayList<>();
        for (TopicPartition tp : assigned) {
            assignment.add(List.of(tp.topic(), tp.partition()));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("records", records);
        out.put("assignment", assignment);
        out.put("revoked", member.revoked);
        return out;
    }

    String commit(Args a) {
        Member member = member(a);
        try {
            member.consumer.commitSync(COMMIT_TIMEOUT);
            return "NONE";
        } catch (Exception e) {
            return ErrorNames.of(e);
        }
    }

    void stop(Args a) {
        Member member = member(a);
        members.remove(a.str("handle"));
        member.consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
    }

    @Override
    public void close() {
        for (Member member : members.values()) {
            try {
                member.consumer.close(CloseOptions.timeout(Duration.ofSeconds(2)));
            } catch (Exception ignored) {
                // the JVM is ending
            }
        }
        members.clear();
    }
}
