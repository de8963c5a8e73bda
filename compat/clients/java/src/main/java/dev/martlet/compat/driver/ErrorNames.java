package dev.martlet.compat.driver;

import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.protocol.Errors;

/** Exceptions of the Java client as the Kafka error names of compat/clients/base.py. */
final class ErrorNames {
    private ErrorNames() {
    }

    /** The Kafka error name of the first ApiException in the cause chain, else "CLIENT_ERROR: ...". */
    static String of(Throwable thrown) {
        Throwable top = unwrap(thrown);
        for (Throwable t = top; t != null; t = t.getCause()) {
            if (t instanceof ApiException) {
                Errors error = Errors.forException(t);
                if (error != Errors.UNKNOWN_SERVER_ERROR || t instanceof UnknownServerException) {
                    return error.name();
                }
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return "CLIENT_ERROR: " + describe(top);
    }

    /** "ExceptionName: message" for driver-level failures (the {"error": ...} answer). */
    static String describe(Throwable thrown) {
        Throwable t = unwrap(thrown);
        String name = t instanceof ApiException ? of(t) : t.getClass().getSimpleName();
        String message = t.getMessage();
        return message == null ? name : name + ": " + message;
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }
}
