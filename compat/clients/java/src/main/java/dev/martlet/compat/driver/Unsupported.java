package dev.martlet.compat.driver;

/** The Java client cannot express an operation; answered as {"unsupported": reason}. */
final class Unsupported extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unsupported(String reason) {
        super(reason);
    }
}
