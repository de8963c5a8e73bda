package dev.martlet.compat.driver;

import java.io.IOException;
import java.io.InputStream;
import java.io.StringReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;

/**
 * What every client of the driver starts from: the properties of the client properties file
 * given after the bootstrap servers ({@code martlet compat --security-config FILE}: its
 * security.protocol, sasl.*, ssl.*), then the bootstrap servers. Each client copies them and
 * adds its own settings, which win over the file's, as a Kafka tool's options win over its
 * --command-config.
 *
 * <p>The file is read as UTF-8, or as ISO-8859-1 when it is not UTF-8 (tools/client_config.py
 * reads it the same way for the Python clients, so all four see the same password).
 */
final class ClientConfig {
    /** A properties file larger than this is refused unread (tools/client_config.py's limit). */
    static final int FILE_BYTES_MAX = 1 << 20;

    private final Properties base = new Properties();

    ClientConfig(String bootstrap, Path file) throws IOException {
        if (file != null) {
            base.load(new StringReader(text(file)));
        }
        base.put("bootstrap.servers", bootstrap);
    }

    /** A fresh copy for one client. */
    Properties copy() {
        Properties props = new Properties();
        props.putAll(base);
        return props;
    }

    private static String text(Path file) throws IOException {
        byte[] data;
        try (InputStream in = Files.newInputStream(file)) {
            data = in.readNBytes(FILE_BYTES_MAX + 1);
        }
        if (data.length > FILE_BYTES_MAX) {
            throw new IOException(file + " is larger than " + FILE_BYTES_MAX + " bytes");
        }
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(data))
                    .toString();
        } catch (CharacterCodingException e) {
            return new String(data, StandardCharsets.ISO_8859_1);
        }
    }
}
