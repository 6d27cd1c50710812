import Glibc
import KeyringKit
import OStackCore
import PlatformKit
import SodiumKit
import Synchronization

/// Builds the real keyring, HTTP and database dependencies for a command.
enum LiveDependencies {
    static let backendNames = ["secret-service", "file"]

    static func authEnvironment(_ context: CommandContext) throws(OStackError) -> AuthEnvironment {
        // Settings are read once. Most commands refuse one that is not valid before they get here
        // (`CommandContext.authEnvironment`); `doctor`, which reports it (and a damaged config.json),
        // and `lock`, `logout` and `accounts remove`, which must work anyway, build without it: a CA
        // file that cannot be used trusts no CA at all (never the system's), and with agent limits
        // that are not valid nothing is handed to the agent (never for the default's 15 minutes).
        let loaded = try? context.configuration.load()
        let configuration = loaded ?? Configuration()
        let defaultBackend = try self.defaultBackend(context, configuration)
        let namespaces = KeyringNamespaces(environment: context.environment)
        // Seconds: above 600 (infinity included) counts as 600, below 0.001 as 0.001; zero, a
        // negative value or not a number is the default.
        let deadline =
            context.environment["OSTACK_KEYRING_TIMEOUT"].flatMap(Double.init).flatMap {
                $0 > 0 ? min(max($0, 0.001), 600) : nil
            } ?? 5
        let passphrase = PassphraseSource(environment: context.environment, noInput: context.global.noInput)
        var client = AgentClient(layout: context.layout, namespaces: namespaces)
        // Also for the file backend's key below: a read that is not use (doctor, audit, a watch
        // cycle, completion) does not keep it unlocked.
        client.countsAsUse = context.countsAsUse
        let agent = client
        let limits = loaded.flatMap { try? AgentLimits(configuration: $0) }
        let processEnvironment = context.environment
        // The file backend unlocks into the agent: its derived key is asked for once per agent session.
        let sharedKey = FileKeyring.DerivedKeyCache(
            load: { agent.key(named: "file-keyring") },
            store: { key in
                guard let limits else { return }
                try? agent.store(key, named: "file-keyring", limits: limits, environment: processEnvironment)
            })
        let backends: [String: any SecretStore] = [
            "secret-service": KeyringSecretStore(keyring: SecretServiceKeyring(app: "ostack", deadline: deadline)),
            "file": KeyringSecretStore(
                keyring: FileKeyring(
                    path: fileKeyringPath(context, namespaces),
                    passphrase: { (isNew) throws(KeyringError) in
                        try passphrase.read(new: isNew)
                    }, sharedCache: sharedKey)),
        ]
        let store = RoutingSecretStore(
            defaultBackend: defaultBackend, backends: backends, namespaces: namespaces, registry: context.registry)
        let caSetting = loaded == nil ? "/dev/null" : (try? configuration.validValue(of: "tls.ca-file")) ?? "/dev/null"
        let timeout = context.global.timeoutSeconds ?? 60
        let transport = CurlTransport(
            connectTimeout: min(10, timeout), totalTimeout: timeout,
            caFile: CurlTransport.caFile(setting: caSetting, environment: context.environment))
        var environment = AuthEnvironment(
            layout: context.layout, secrets: store, namespaces: namespaces, transport: transport,
            keyringBackend: defaultBackend, provisionDatabase: AccountDatabase.provision)
        environment.agent = agent
        return environment
    }

    /// `--keyring` > `OSTACK_KEYRING_BACKEND` > config `keyring.backend` > secret-service.
    static func defaultBackend(_ context: CommandContext, _ configuration: Configuration) throws(OStackError) -> String {
        // A configured value that is not valid was refused by name before (see `authEnvironment`).
        let configured = try? configuration.validValue(of: "keyring.backend")
        let chosen =
            context.global.keyring ?? context.environment["OSTACK_KEYRING_BACKEND"] ?? configured ?? "secret-service"
        guard backendNames.contains(chosen) else {
            throw OStackError(.invalidInput, context: .init(suggestion: "Keyring backends: secret-service, file."))
        }
        return chosen
    }

    /// `keyring migrate` and its resumption: a backend may hold items only if it exists without asking
    /// (the file backend once its file exists), so resuming never prompts for an unused backend.
    static func keyringMigration(_ context: CommandContext, _ environment: AuthEnvironment) -> KeyringMigration? {
        guard let store = environment.secrets as? RoutingSecretStore else { return nil }
        let filePath = fileKeyringPath(context, environment.namespaces)
        return KeyringMigration(
            environment: environment, store: store,
            mayHoldItems: { name in name != "file" || SecureFileSystem.exists(filePath) })
    }

    /// `keyring.enc` (or `keyring-<prefix>.enc` for another keyring prefix) in the data directory.
    static func fileKeyringPath(_ context: CommandContext, _ namespaces: KeyringNamespaces) -> String {
        let name = namespaces.prefix == "ostack" ? "keyring.enc" : "keyring-\(namespaces.prefix).enc"
        return context.layout.dataDirectory + "/" + name
    }
}

/// The file keyring's passphrase: from the file descriptor named by `OSTACK_KEYRING_PASSPHRASE_FD`
/// (for scripts: never argv, environment values or files), else a no-echo prompt on the terminal.
struct PassphraseSource: Sendable {
    let descriptor: Int32?
    let noInput: Bool
    /// Set once the two new passphrases differed: the command's clean-up must not ask again.
    private let mismatched = Flag()

    final class Flag: Sendable {
        private let value = Mutex(false)
        func withLock<T>(_ body: (inout Bool) -> T) -> T { value.withLock { body(&$0) } }
    }

    init(environment: [String: String], noInput: Bool) {
        descriptor = environment["OSTACK_KEYRING_PASSPHRASE_FD"].flatMap { Int32($0) }
        self.noInput = noInput
    }

    /// The passphrase from the descriptor, else from a no-echo prompt; a `new` one (the file is
    /// about to be created) is asked twice on a terminal, so a typo cannot lock every secret away.
    func read(new: Bool = false) throws(KeyringError) -> SecretBytes {
        if let descriptor {
            var staging = [UInt8](repeating: 0, count: 1024)
            defer { SecretBytes.wipe(&staging) }
            var count = 0
            while count < staging.count {
                var byte: UInt8 = 0
                let n = Glibc.read(descriptor, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 || byte == UInt8(ascii: "\n") { break }
                staging[count] = byte
                count += 1
            }
            guard count > 0 else { throw KeyringError.passphraseRequired }
            return SecretBytes(copying: staging[0..<count])
        }
        if new && mismatched.withLock({ $0 }) { throw KeyringError.passphraseMismatch }
        let first: SecretBytes
        do {
            first = try SecretInput.prompt(
                new ? "New keyring passphrase: " : "Keyring passphrase: ", noInput: noInput,
                flag: "OSTACK_KEYRING_PASSPHRASE_FD")
        } catch {
            throw KeyringError.passphraseRequired
        }
        guard new else { return first }
        let again: SecretBytes
        do {
            again = try SecretInput.prompt(
                "Repeat the keyring passphrase: ", noInput: noInput, flag: "OSTACK_KEYRING_PASSPHRASE_FD")
        } catch {
            throw KeyringError.passphraseRequired
        }
        // One passphrase in either Unicode form is the same passphrase (docs/security.md#pin-7).
        guard again.composed == first.composed else {
            mismatched.withLock { $0 = true }
            throw KeyringError.passphraseMismatch
        }
        return first
    }
}

extension CommandContext {
    /// KeePassXC keeps deleted items in its recycle bin and replaced values in entry history, so a
    /// delete there is not an erase (docs/threat-model.md, "Keyring providers"). Nil for other providers.
    func keyringRetentionWarning(_ account: Account) -> String? {
        guard account.keyringBackend == "secret-service", SecretServiceKeyring.detectProvider().keepsDeletedItems
        else { return nil }
        return """
            ostack: warning: your keyring is KeePassXC, which keeps deleted and replaced items in its recycle bin \
            and entry history: the plain database key and the unsealed token may still be there. Empty the recycle \
            bin and delete the history of the ostack entries in KeePassXC.
            """
    }
}
