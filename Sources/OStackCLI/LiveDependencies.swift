import KeyringKit
import OStackCore

/// Builds the real keyring, HTTP and database dependencies for a command.
enum LiveDependencies {
    static func authEnvironment(_ context: CommandContext) throws(OStackError) -> AuthEnvironment {
        let backend = context.environment["OSTACK_KEYRING_BACKEND"] ?? "secret-service"
        guard backend == "secret-service" else {
            throw OStackError(
                .keyringUnavailable, context: .init(suggestion: "Only the secret-service keyring backend is available."),
                detail: "keyring backend \(backend) is not available")
        }
        let deadline = context.environment["OSTACK_KEYRING_TIMEOUT"].flatMap(Double.init) ?? 5
        return AuthEnvironment(
            layout: context.layout,
            secrets: KeyringSecretStore(keyring: SecretServiceKeyring(app: "ostack", deadline: deadline)),
            namespaces: KeyringNamespaces(environment: context.environment),
            transport: CurlTransport(),
            keyringBackend: backend,
            provisionDatabase: AccountDatabase.provision)
    }
}
