import FoundationEssentials
import KeyringKit
@testable import OStackCore
import OStackTestSupport
import PlatformKit
import SodiumKit
import Testing

/// A sign-in that does not become an account signs its new session out and leaves nothing in the
/// guest namespace (docs/security.md#tok-6).
@Suite struct LoginCleanupTests {
    let home = TemporaryDirectory()
    let keyring = InMemoryKeyring()
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let server = FakeObjectStack()
    let namespaces = KeyringNamespaces(prefix: "test")

    var environment: AuthEnvironment {
        AuthEnvironment(
            layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1), secrets: secrets,
            namespaces: namespaces, transport: server, keyringBackend: "secret-service",
            provisionDatabase: { _, _ in })
    }

    func plantInterruptedSignIn(kind: String) throws {
        try environment.layout.createDirectories()
        let itemKind: SecretKind = kind == "api-key" ? .apiKey : .sessionToken
        try secrets.write(SecretBytes(copying: Array("tok_crashed_0001".utf8)), for: environment.guestKey(itemKind))
        server.state.withLock { $0.tokens["tok_crashed_0001"] = "usr_alice" }
        let journal =
            #"{"version":1,"phase":"signingIn","server":"http://127.0.0.1:9","credentialKind":"\#(kind)","makeDefault":true}"#
        try SecureFileSystem.writeAtomically(
            Array(journal.utf8), to: environment.layout.stateDirectory + "/login-journal.json")
    }

    @Test func aCrashedSignInIsSignedOutAndTheGuestNamespaceEmptied() throws {
        try plantInterruptedSignIn(kind: "session")
        try LoginService(environment: environment).recoverInterruptedLogin()
        #expect(server.state.withLock { $0.signOutCount } == 1)
        #expect(keyring.count == 0)
        #expect(try environment.registry.accounts().isEmpty)
        #expect(!SecureFileSystem.exists(environment.layout.stateDirectory + "/login-journal.json"))
    }

    @Test func anAPIKeyIsNeverSignedOut() throws {
        try plantInterruptedSignIn(kind: "api-key")
        try LoginService(environment: environment).recoverInterruptedLogin()
        #expect(server.state.withLock { $0.signOutCount } == 0)
        #expect(keyring.count == 0)
    }
}
