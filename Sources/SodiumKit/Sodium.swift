internal import CSodium

/// One-time libsodium initialisation (docs/security.md#sod-1).
///
/// Every SodiumKit entry point calls `Sodium.ensureInitialized()` first. `sodium_init()` is
/// thread-safe and idempotent: 0 means initialised now, 1 means already initialised, -1 means
/// the library cannot work (no entropy source) — a programmer/platform error we cannot recover
/// from, so it traps.
public enum Sodium {
    private static let initialized: Bool = {
        sodium_init() >= 0
    }()

    /// Initialises libsodium once; traps if the library refuses to work.
    public static func ensureInitialized() {
        precondition(initialized, "libsodium could not be initialised (sodium_init returned -1)")
    }

    /// The libsodium version string, e.g. "1.0.18".
    public static var versionString: String {
        ensureInitialized()
        return String(cString: sodium_version_string())
    }
}
