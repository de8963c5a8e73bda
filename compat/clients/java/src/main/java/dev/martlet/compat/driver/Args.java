package dev.martlet.compat.driver;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;

/** Keyword arguments of one request, with the defaults of compat/clients/base.py. */
final class Args {
    private final JsonNode node;

    Args(JsonNode node) {
        this.node = node == null || node.isNull() ? NullNode.getInstance() : node;
    }

    JsonNode raw(String name) {
        JsonNode value = node.get(name);
        return value == null || value.isNull() ? null : value;
    }

    boolean has(String name) {
        return raw(name) != null;
    }

    String str(String name) {
        JsonNode value = required(name);
        if (!value.isTextual()) {
            throw new IllegalArgumentException("argument " + name + " must be a string, not " + value);
        }
        return value.asText();
    }

    String str(String name, String fallback) {
        return has(name) ? str(name) : fallback;
    }

    int integer(String name) {
        JsonNode value = required(name);
        if (!value.canConvertToInt()) {
            throw new IllegalArgumentException("argument " + name + " must be an int, not " + value);
        }
        return value.asInt();
    }

    Integer integer(String name, Integer fallback) {
        return has(name) ? Integer.valueOf(integer(name)) : fallback;
    }

    double number(String name) {
        JsonNode value = required(name);
        if (!value.isNumber()) {
            throw new IllegalArgumentException("argument " + name + " must be a number, not " + value);
        }
        return value.asDouble();
    }

    boolean bool(String name, boolean fallback) {
        JsonNode value = raw(name);
        return value == null ? fallback : value.asBoolean();
    }

    List<String> strings(String name) {
        List<String> out = new ArrayList<>();
        for (JsonNode item : array(name)) {
            out.add(item.asText());
        }
        return out;
    }

    /** A list of ints, or null when the argument is absent or null. */
    List<Integer> integersOrNull(String name) {
        if (!has(name)) {
            return null;
        }
        List<Integer> out = new ArrayList<>();
        for (JsonNode item : array(name)) {
            out.add(item.asInt());
        }
        return out;
    }

    Map<String, String> stringMap(String name) {
        Map<String, String> out = new LinkedHashMap<>();
        JsonNode value = raw(name);
        if (value == null) {
            return out;
        }
        for (Map.Entry<String, JsonNode> e : value.properties()) {
            out.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
        }
        return out;
    }

    JsonNode array(String name) {
        JsonNode value = required(name);
        if (!value.isArray()) {
            throw new IllegalArgumentException("argument " + name + " must be a list, not " + value);
        }
        return value;
    }

    private JsonNode required(String name) {
        JsonNode value = raw(name);
        if (value == null) {
            throw new IllegalArgumentException("missing argument " + name);
        }
        return value;
    }
}
