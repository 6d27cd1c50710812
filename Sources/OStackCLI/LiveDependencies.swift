import OStackCore

/// Builds the real keyring, HTTP and database dependencies. (Wired to KeyringKit, CurlKit and
/// SQLCipherKit as those land.)
enum LiveDependencies {
    static func authEnvironment(_ context: CommandContext) throws(OStackError) -> AuthEnvironment {
        throw OStackError(.keyringUnavailable, detail: "live keyring and transport are not wired yet")
    }
}
