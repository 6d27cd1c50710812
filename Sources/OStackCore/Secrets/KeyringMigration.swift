import FoundationEssentials
import PlatformKit

/// `ostack keyring migrate --to BACKEND`: moves every item of an account between backends (docs/keyring.md):
/// journal → copy, verify by reading back → switch the account's backend in the registry → delete from the
/// old backend (verified) → clear the journal.
///
/// The journal (`state/keyring-migration.json`, non-secret) is honoured by every command's start, like the
/// login journal (`resumeInterrupted`): before the switch the source is authoritative and the copy is
/// redone from it; after the switch the registry's backend is, and every copy of the account's items in
/// another backend is a stale copy that is deleted, whatever its value (a command that ran meanwhile
/// may have rotated the token or moved the audit anchor in the new backend).
public struct KeyringMigration: Sendable {
    public let environment: AuthEnvironment
    public let store: RoutingSecretStore
    /// Whether a backend can hold items at all without asking for anything (e.g. the file backend
    /// only once its file exists), so a resumed migration never prompts for an unused backend.
    public let mayHoldItems: @Sendable (String) -> Bool

    public init(
        environment: AuthEnvironment, store: RoutingSecretStore, mayHoldItems: @escaping @Sendable (String) -> Bool
    ) {
        self.environment = environment
        self.store = store
        self.mayHoldItems = mayHoldItems
    }

    public struct Outcome: Sendable, Equatable {
        public var account: String
        public var moved: Int
        public var cleaned: Int
    }

    /// The migration journal: which account moves where, and whether the registry was switched.
    struct Journal: Codable, Equatable {
        enum Phase: String, Codable { case copying, switched }
        var version = 1
        var account: String
        var from: String
        var to: String
        var phase: Phase

        static func path(_ layout: FileLayout) -> String { layout.stateDirectory + "/keyring-migration.json" }

        static func load(_ layout: FileLayout) throws(OStackError) -> Journal? {
            let journal = try JournalFile.read(Journal.self, at: path(layout), name: "keyring migration journal")
            guard journal == nil || journal?.version == 1 else {
                throw OStackError(.unsupportedFormat, detail: "the keyring migration journal is not readable")
            }
            return journal
        }

        func save(_ layout: FileLayout) throws(OStackError) {
            try JournalFile.write(
                self, to: Self.path(layout), in: layout.stateDirectory, name: "keyring migration journal")
        }

        static func clear(_ layout: FileLayout) throws(OStackError) {
            try JournalFile.clear(path(layout), name: "keyring migration journal")
        }
    }

    /// Whether a migration was interrupted (one `stat`).
    public static func isPending(_ layout: FileLayout) -> Bool { SecureFileSystem.exists(Journal.path(layout)) }

    /// The interrupted migration's account id and target backend, for `doctor`.
    public static func pending(_ layout: FileLayout) -> (account: String, to: String)? {
        guard let journal = try? Journal.load(layout) else { return nil }
        return (journal.account, journal.to)
    }

    /// Finishes a migration interrupted by a crash. Cheap when there is none (one `stat`), so every
    /// command that opens the keyring calls it first.
    public func resumeInterrupted() throws(OStackError) {
        guard Self.isPending(environment.layout), let journal = try Journal.load(environment.layout) else { return }
        guard let account = try environment.registry.accounts().first(where: { $0.id.rawValue == journal.account })
        else {
            // The account is gone: whatever is left of its items anywhere is an orphan.
            let namespace = "\(environment.namespaces.prefix):auth:\(journal.account)"
            for name in [journal.from, journal.to] where mayHoldItems(name) {
                let backend = try store.store(named: name)
                for key in try backend.list(namespace: namespace) { try backend.delete(key) }
            }
            try Journal.clear(environment.layout)
            return
        }
        _ = try migrate(account, to: journal.to, alsoClean: [journal.from])
    }

    public func migrate(_ account: Account, to target: String) throws(OStackError) -> Outcome {
        try migrate(account, to: target, alsoClean: [])
    }

    func migrate(_ account: Account, to target: String, alsoClean: Set<String>) throws(OStackError) -> Outcome {
        AnchorWrites.settle()  // an anchor this process still writes is moved too
        let destination = try store.store(named: target)
        let namespace = environment.namespaces.account(account.id)
        var moved = 0
        let source = account.keyringBackend
        if source != target {
            // Before the journal: a destination that cannot be opened (no passphrase without a
            // terminal, Ctrl-C at its prompt) stops the migration before it has begun, instead of
            // leaving a journal every later command would try to finish.
            try destination.prepareForWriting()
            var journal = Journal(account: account.id.rawValue, from: source, to: target, phase: .copying)
            try journal.save(environment.layout)
            FailPoint.hit("keyring-migrate.after-journal")
            let origin = try store.store(named: source)
            for key in try origin.list(namespace: namespace) {
                guard let value = try origin.read(key) else { continue }
                try destination.write(value, for: key, label: store.label(for: key, account: account))
                guard let back = try destination.read(key), back == value else {
                    throw OStackError(.keyringUnavailable, detail: "migrated item did not read back")
                }
                moved += 1
            }
            FailPoint.hit("keyring-migrate.after-copy")
            try environment.registry.update { (accounts: inout [Account]) throws(OStackError) in
                if let index = accounts.firstIndex(where: { $0.id == account.id }) {
                    accounts[index].keyringBackend = target
                }
            }
            let details = ["from": source, "to": target]
            environment.audit(account, "keyring.backend-change", details: details)
            environment.auditGlobal(
                "keyring.backend-change", details: details.merging(["account": account.id.rawValue]) { a, _ in a })
            FailPoint.hit("keyring-migrate.after-switch")
            journal.phase = .switched
            try journal.save(environment.layout)
            FailPoint.hit("keyring-migrate.after-journal-switched")
        }
        // The registry names `target` now: copies in any other backend are stale, whatever they hold.
        var cleaned = 0
        for (name, other) in store.backends.sorted(by: { $0.key < $1.key })
        where name != target && (name == source || alsoClean.contains(name) || mayHoldItems(name)) {
            for key in try other.list(namespace: namespace) {
                try other.delete(key)  // verified (docs/security.md#kr-7)
                cleaned += 1
                FailPoint.hit("keyring-migrate.after-first-delete")
            }
        }
        if Self.isPending(environment.layout) { try Journal.clear(environment.layout) }
        return Outcome(account: account.alias, moved: moved, cleaned: cleaned)
    }

    /// Stale copies of `account`'s items: those in a backend other than the one its registry entry
    /// names (left by an interrupted migration). For `doctor`.
    public func staleCopies(of account: Account) throws(OStackError) -> [(backend: String, kinds: [SecretKind])] {
        let namespace = environment.namespaces.account(account.id)
        var found: [(backend: String, kinds: [SecretKind])] = []
        for (name, other) in store.backends.sorted(by: { $0.key < $1.key })
        where name != account.keyringBackend && mayHoldItems(name) {
            let kinds = try other.list(namespace: namespace).map(\.kind)
            if !kinds.isEmpty { found.append((name, kinds.sorted { $0.rawValue < $1.rawValue })) }
        }
        return found
    }
}
