package dev.martlet.compat.driver;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The Java client driver of compat/clients/base.py: reads one JSON request per line on stdin,
 * {"op": "<method>", "args": {...}}, and writes one answer per line on stdout: {"ok": value},
 * {"unsupported": reason} or {"error": message}. Requests run one at a time, in order.
 *
 * <p>Usage: {@code java -cp ... dev.martlet.compat.driver.Driver <bootstrap> [<client properties
 * file>]}; the file's properties (security.protocol, sasl.*, ssl.*) go into every client's config
 * (see ClientConfig). Everything else the JVM prints (client log lines included) goes to stderr. The extra ops "hello"
 * (answers the client version) and "close" (answers, then exits) serve the Python side.
 */
public final class Driver {
    private static final ObjectMapper JSON = new ObjectMapper();
    static final String CLIENT_VERSION = clientVersion();

    private final AdminOps admin;
    private final ClientOps clients;
    private final Members members;
    private final Transactions transactions;
    private boolean closing;

    Driver(ClientConfig config) {
        admin = new AdminOps(config);
        clients = new ClientOps(config);
        members = new Members(config);
        transactions = new Transactions(clients);
    }

    public static void main(String[] argv) throws IOException {
        if (argv.length < 1 || argv.length > 2) {
            System.err.println("usage: Driver <bootstrap servers> [<client properties file>]");
            System.exit(2);
        }
        ClientConfig config;
        try {
            config = new ClientConfig(argv[0], argv.length == 2 ? Path.of(argv[1]) : null);
        } catch (IOException | IllegalArgumentException e) {  // unreadable, or a malformed unicode escape
            System.err.println("cannot read the client properties file: " + e);
            System.exit(2);
            return;
        }
        // stdout carries the protocol only: whatever else writes to System.out lands on stderr
        OutputStream protocolOut = new FileOutputStream(FileDescriptor.out);
        PrintStream protocol = new PrintStream(protocolOut, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Driver driver = new Driver(config);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            String line;
            while (!driver.closing && (line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                String answer = JSON.writeValueAsString(driver.handle(line));
                protocol.print(answer);
                protocol.print('\n');
                protocol.flush();
            }
        } finally {
            driver.shutdown();
        }
        System.exit(0);
    }

    Map<String, Object> handle(String line) {
        Map<String, Object> answer = new LinkedHashMap<>();
        try {
            JsonNode request = JSON.readTree(line);
            JsonNode op = request.get("op");
            if (op == null || !op.isTextual()) {
                throw new IllegalArgumentException("request without an op: " + line);
            }
            answer.put("ok", dispatch(op.asText(), new Args(request.get("args"))));
        } catch (Unsupported e) {
            answer.clear();
            answer.put("unsupported", e.getMessage());
        } catch (Throwable e) {
            answer.clear();
            answer.put("error", ErrorNames.describe(e));
            e.printStackTrace();
        }
        return answer;
    }

    private Object dispatch(String op, Args a) throws Exception {
        switch (op) {
            case "hello":
                return Map.of("client", "java", "version", CLIENT_VERSION);
            case "create_topic":
                return admin.createTopic(a);
            case "delete_topic":
                return admin.deleteTopic(a);
            case "add_partitions":
                return admin.addPartitions(a);
            case "describe_topic":
                return admin.describeTopic(a);
            case "alter_topic_config":
                return admin.alterTopicConfig(a);
            case "describe_broker":
                return admin.describeBroker();
            case "delete_records":
                return admin.deleteRecords(a);
            case "api_versions":
                throw new Unsupported("the Java client " + CLIENT_VERSION
                        + " has no public API for ApiVersions (only its internal NetworkClient sees them)");
            case "produce":
                return clients.produce(a);
            case "consume":
                return clients.consume(a);
            case "list_offsets":
                return admin.listOffsets(a);
            case "member_start":
                members.start(a);
                return null;
            case "reader_start":
                members.startReader(a);
                return null;
            case "member_poll":
                return members.poll(a);
            case "member_commit":
                return members.commit(a);
            case "member_stop":
                members.stop(a);
                return null;
            case "committed":
                return admin.committed(a);
            case "transaction":
                return clients.transaction(a);
            case "transaction_begin":
                return transactions.begin(a);
            case "transaction_send":
                return transactions.send(a);
            case "transaction_end":
                return transactions.end(a);
            case "consume_position":
                return clients.consumePosition(a);
            case "close":
                closing = true;
                return null;
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** kafka-clients' version, from the properties file its jar carries. */
    private static String clientVersion() {
        Properties props = new Properties();
        try (var in = Driver.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
            if (in != null) {
                props.load(in);
            }
        } catch (IOException e) {
            return "unknown";
        }
        return props.getProperty("version", "unknown");
    }

    private void shutdown() {
        try {
            transactions.close();
            members.close();
        } finally {
            admin.close();
        }
    }
}
