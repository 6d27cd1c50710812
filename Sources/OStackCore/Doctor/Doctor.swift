import FoundationEssentials
import Glibc
import KeyringKit
import PlatformKit

/// `ostack doctor` (docs/audit.md, "Doctor"): health checks, globally and per account, each `ok`, `warn` or `fail`
/// with a one-line fix. A check that could not be carried out says so (`checked: false`, status
/// `warn`) — "invalid" and "could not check" are never confused.
public struct Doctor: Sendable {
    /// Its message and fix are our wording; the CLI renders them (text and `--json`).
    public struct Check: Sendable, Equatable {
        public enum Status: String, Sendable, Codable { case ok, warn, fail }
        public var name: String
        public var account: String?
        public var status: Status
        public var message: Wording
        public var fix: Wording?
        /// False when the check could not be carried out (the message says why).
        public var checked: Bool
    }

    public let environment: AuthEnvironment
    /// Asks the server for its `Date` (clock skew); nil skips the check as "could not check".
    public var probeServerDate: (@Sendable (Account) -> Date?)?
    public var now: @Sendable () -> Date = { Date() }
    /// The Secret Service provider (gnome-keyring, KWallet, KeePassXC…); nil: not known.
    public var keyringProvider: (@Sendable () -> SecretServiceKeyring.Provider)?
    /// Items of an account left in a backend other than its own (an interrupted `keyring migrate`).
    public var staleCopies: (@Sendable (Account) throws(OStackError) -> [(backend: String, kinds: [SecretKind])])?
    /// Free bytes on the file system holding `path` (nil: unknown), to tell a full disk from damage.
    public var freeSpace: @Sendable (String) -> Int? = Doctor.availableBytes

    /// Whether the keyring answered the first check: when it did not (locked, timed out, missing),
    /// checks that need it say "could not check" instead of each costing a deadline or guessing.
    enum KeyringState: Equatable { case usable, unusable(String) }

    public init(environment: AuthEnvironment) {
        self.environment = environment
    }

    public func run(accounts: [Account]) -> [Check] {
        var checks: [Check] = []
        let (globalChecks, keyring) = global()
        checks += globalChecks
        for account in accounts { checks += self.account(account, keyring: keyring) }
        return checks
    }

    /// `statvfs` of `path`'s file system: bytes available to an unprivileged writer.
    public static func availableBytes(_ path: String) -> Int? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    /// The file system is full (less than 1 MiB free), so a database that does not open is not damaged.
    func diskIsFull(_ path: String) -> Bool {
        guard let free = freeSpace(path) else { return false }
        return free < 1 << 20
    }

    func check(
        _ name: String, _ account: Account?, _ status: Check.Status, _ message: Wording, fix: Wording? = nil,
        checked: Bool = true
    ) -> Check {
        Check(name: name, account: account?.alias, status: status, message: message, fix: fix, checked: checked)
    }

    // MARK: Global

    func global() -> ([Check], KeyringState) {
        var checks: [Check] = []
        var state = KeyringState.usable
        // Keyring reachable, its default collection present and unlocked: asked directly, since a
        // listing answers "nothing there" for a locked or missing collection on some providers.
        do {
            try environment.secrets.checkAvailable()
            checks.append(
                check("keyring", nil, .ok, "The keyring (\(environment.keyringBackend)) answers and is unlocked."))
        } catch {
            switch error.code {
            case .keyringLocked where KeyringSecretStore.isNoCollection(error):
                state = .unusable("the keyring has no open default collection")
                checks.append(
                    check(
                        "keyring", nil, .fail,
                        "The keyring has no open default collection (the login keyring is not loaded, or the password manager's database is closed); ostack's items may exist but cannot be seen.",
                        fix:
                            "Open it — log out and back in, or unlock the KeePassXC database — and run \(command: .doctor) again. Remove nothing until then."
                    ))
            case .keyringLocked:
                state = .unusable("the keyring is locked")
                checks.append(
                    check(
                        "keyring", nil, .fail, "The keyring is locked.",
                        fix:
                            "Unlock your login keyring (log in to the desktop session, or open your keyring application), then run \(command: .doctor) again."
                    ))
            case .keyringTimeout:
                state = .unusable("the keyring did not answer")
                let approval = error.context.suggestion == KeyringSecretStore.approvalHint
                checks.append(
                    check(
                        "keyring", nil, .fail, "The keyring did not answer in time.",
                        fix: approval
                            ? KeyringSecretStore.approvalHint
                            : "Check that the keyring daemon (gnome-keyring, KWallet, KeePassXC) is running and not hung."
                    ))
            case .wrongPassphrase, .inputRequired:
                state = .unusable("the file keyring is not open")
                checks.append(
                    check(
                        "keyring", nil, .warn, "Could not open the file keyring (passphrase).", checked: false))
            default:
                state = .unusable("no keyring is reachable")
                checks.append(
                    check(
                        "keyring", nil, .fail, "No keyring is reachable.",
                        fix: "Start a Secret Service (gnome-keyring, KWallet), or use `--keyring file`."))
            }
        }
        if let provider = keyringProvider?(), provider.keepsDeletedItems {
            checks.append(
                check(
                    "keyring-provider", nil, .warn,
                    "The keyring is \(provider.name), which keeps deleted items in its recycle bin and replaced values in entry history: removing an account, signing out or setting a PIN does not erase the old secrets there.",
                    fix:
                        "In \(provider.name), empty the recycle bin and delete the history of the entries made by this tool (or turn both off for the database that holds them)."
                ))
        }
        // Interrupted operations that the next command finishes.
        if SecureFileSystem.exists(LoginJournal.path(environment.layout)) {
            checks.append(
                check(
                    "login", nil, .warn,
                    "A sign-in was interrupted; the next command that uses the keyring finishes or undoes it.",
                    fix: .run(.authRefresh)))
        }
        if let pending = KeyringMigration.pending(environment.layout) {
            let alias = (try? environment.registry.accounts().first { $0.id.rawValue == pending.account })?.alias
            checks.append(
                check(
                    "keyring-migration", nil, .warn,
                    "A keyring migration to \(pending.to) was interrupted; the next command that uses the keyring finishes it.",
                    fix: .run(.keyringMigrate(backend: pending.to, account: alias ?? pending.account))))
        }
        // Modes of the directories and files ostack keeps.
        var wrong: [String] = []
        for directory in [environment.layout.dataDirectory, environment.layout.accountsDirectory] {
            if let mode = SecureFileSystem.mode(of: directory), mode & 0o077 != 0 { wrong.append(directory) }
        }
        for file in [environment.layout.registryFile, environment.layout.configFile] {
            if let mode = SecureFileSystem.mode(of: file), mode & 0o077 != 0 { wrong.append(file) }
        }
        checks.append(
            wrong.isEmpty
                ? check("file-modes", nil, .ok, "ostack's directories are 0700 and its files 0600.")
                : check(
                    "file-modes", nil, .fail, "\(wrong.count) path(s) are readable by others.",
                    fix: "chmod 700 the directories and 600 the files under \(environment.layout.dataDirectory).")
        )
        // The agent (only matters with PIN-protected accounts).
        if let agent = environment.agent, agent.mightBeRunning {
            checks.append(check("agent", nil, .ok, "The agent is running."))
        } else {
            checks.append(
                check("agent", nil, .ok, "The agent is not running (it starts on \(command: .unlock(account: nil)))."))
        }
        // The global trail (its anchor is in the keyring).
        if case .unusable(let why) = state {
            checks.append(
                check(
                    "audit-global", nil, .warn, "Could not check the global audit trail: \(why).", checked: false))
            return (checks, state)
        }
        do {
            let verification = try GlobalAuditTrail(
                layout: environment.layout, secrets: environment.secrets, namespaces: environment.namespaces
            ).verify()
            checks.append(
                verification.intact
                    ? check(
                        "audit-global", nil, .ok, "The global audit trail is intact (\(verification.events) events).")
                    : check(
                        "audit-global", nil, .fail,
                        "The global audit trail is not intact at sequence \(verification.firstBadSeq ?? 0).",
                        fix: "Someone changed ostack's files; review \(command: .auditAll) and the account's keyring."))
        } catch {
            checks.append(
                check(
                    "audit-global", nil, .warn, "Could not check the global audit trail (keyring).", fix: nil,
                    checked: false))
        }
        return (checks, state)
    }

    // MARK: Per account

    func account(_ account: Account, keyring: KeyringState = .usable) -> [Check] {
        var checks: [Check] = []
        // An interrupted `accounts remove`: its keyring items are gone (by design, first), its files not yet.
        if SecureFileSystem.exists(LogoutService.removalMarker(environment, account)) {
            checks.append(
                check(
                    "account", account, .fail,
                    "Removing this account was interrupted: its keyring items are deleted, its files not yet.",
                    fix: "Run \(command: .accountsRemove(account: account.alias)) again to finish."))
            return checks
        }
        // Session.
        let session = AccountsService.sessionStatus(of: account, now: now())
        switch session.state {
        case .valid:
            if let expiry = session.expiresAt, expiry.timeIntervalSince(now()) < 86_400 {
                checks.append(
                    check(
                        "session", account, .warn, "The session expires within a day.",
                        fix: .run(.authRefresh)))
            } else {
                checks.append(check("session", account, .ok, "Signed in; the session is valid."))
            }
        case .expired:
            checks.append(
                check(
                    "session", account, .fail, "The session has expired.",
                    fix: .run(.login(account: account.alias))))
        case .signedOut:
            checks.append(
                check(
                    "session", account, .warn, "Signed out (local data is kept).",
                    fix: "Run \(command: .login(account: nil)) to sign in again."))
        }
        // Files.
        let directory = environment.layout.accountDirectory(account.dataDirectory)
        let database = environment.databasePath(account)
        var wrong: [String] = []
        if let mode = SecureFileSystem.mode(of: directory), mode & 0o077 != 0 { wrong.append(directory) }
        for file in [
            database, database + "-wal", database + "-shm", directory + "/state.json",
            directory + "/audit-pending.jsonl",
        ] {
            if let mode = SecureFileSystem.mode(of: file), mode & 0o077 != 0 { wrong.append(file) }
        }
        checks.append(
            wrong.isEmpty
                ? check("file-modes", account, .ok, "The account's files are private.")
                : check(
                    "file-modes", account, .fail, "\(wrong.count) file(s) of the account are readable by others.",
                    fix: "chmod 700 \(directory) and chmod 600 the files in it."))
        if PINJournal.isPending(environment, account) {
            checks.append(
                check(
                    "pin", account, .warn,
                    "A PIN change was interrupted; the next command that uses the keyring finishes or undoes it.",
                    fix: .run(.authRefresh)))
        }
        // Keyring items: expected present, nothing stray — and no stale copies in another backend.
        if case .unusable(let why) = keyring {
            checks.append(
                check("keyring-items", account, .warn, "Could not check the keyring items: \(why).", checked: false))
            checks.append(check("database", account, .warn, "Could not check the database: \(why).", checked: false))
            return checks
        }
        checks.append(keyringItems(account))
        if let staleCopies {
            do {
                for (backend, kinds) in try staleCopies(account) {
                    checks.append(
                        check(
                            "stale-copies", account, .warn,
                            "Stale copies of \(kinds.map(\.rawValue).joined(separator: ", ")) are left in the \(backend) keyring backend (an interrupted keyring migration).",
                            fix: .run(.keyringMigrate(backend: account.keyringBackend, account: account.alias))))
                }
            } catch {
                checks.append(
                    check(
                        "stale-copies", account, .warn,
                        "Could not look for stale copies in other keyring backends (\(error.code.rawValue)).",
                        checked: false))
            }
        }
        // A sign-in interrupted before this account's database was created: not damage.
        if (try? LoginJournal.load(environment.layout))??.accountID == account.id,
            !SecureFileSystem.exists(database)
        {
            checks.append(
                check(
                    "database", account, .warn,
                    "The sign-in of this account was interrupted before its database was created; the next command finishes it.",
                    fix: .run(.authRefresh), checked: false))
            return checks
        }
        // Database, queue, sync and audit need the key.
        let service: AccountSession
        do {
            service = try AccountSession(account: account, environment: environment)
        } catch {
            checks.append(databaseOpenFailure(account, error, directory: directory))
            return checks
        }
        do {
            if try service.store.database.integrityProblem() != nil {
                checks.append(
                    check(
                        "database", account, .fail, "The database fails its integrity check.",
                        fix: "Restore the account's files from a backup (there is no other copy)."))
            } else {
                checks.append(
                    check("database", account, .ok, "The database opens with its key and passes the integrity check."))
            }
        } catch {
            checks.append(
                diskIsFull(directory)
                    ? check(
                        "database", account, .warn, "Could not check the database: the disk is full.",
                        fix: "Free disk space, then run \(command: .doctor) again.", checked: false)
                    : check(
                        "database", account, .fail, "The database fails its integrity check.",
                        fix: "Restore the account's files from a backup (there is no other copy)."))
        }
        if let counts = try? service.store.counts() {
            checks.append(
                counts.pending > 1000
                    ? check(
                        "queue", account, .warn, "\(counts.pending) changes are waiting to be pushed.",
                        fix: .run(.sync))
                    : check("queue", account, .ok, "\(counts.pending) change(s) waiting to be pushed."))
            checks.append(
                counts.failed > 0
                    ? check(
                        "queue-failed", account, .warn, "\(counts.failed) change(s) failed to push.",
                        fix: "See \(command: .queueList); then \(command: .queueRetry) or \(command: .queueDiscard).")
                    : check("queue-failed", account, .ok, "No failed changes."))
            checks.append(
                counts.conflict > 0
                    ? check(
                        "conflicts", account, .warn, "\(counts.conflict) conflict(s) need a decision.",
                        fix: "Run \(command: .conflictsList) and \(command: .conflictsResolve).")
                    : check("conflicts", account, .ok, "No conflicts."))
        }
        let tracked = (try? service.store.trackedObjects()) ?? []
        if let last = try? service.lastSyncAt() {
            let age = now().timeIntervalSince(last)
            checks.append(
                age > 7 * 86_400
                    ? check(
                        "last-sync", account, .warn, "The last successful sync was \(Int(age / 86_400)) days ago.",
                        fix: .run(.sync))
                    : check("last-sync", account, .ok, "Last successful sync: \(last.formatted(.iso8601))."))
        } else if !tracked.isEmpty {
            checks.append(
                check("last-sync", account, .warn, "Tracked objects were never synced.", fix: .run(.sync)))
        }
        do {
            let verification = try service.audit.verify()
            checks.append(
                verification.intact
                    ? check("audit", account, .ok, "The audit trail is intact (\(verification.events) events).")
                    : check(
                        "audit", account, .fail,
                        "The audit trail is not intact at sequence \(verification.firstBadSeq ?? 0).",
                        fix:
                            "The account's files were changed or restored from an older copy: review \(command: .auditVerify)."
                    ))
        } catch {
            checks.append(
                check(
                    "audit", account, .warn, "Could not check the audit trail (\(error.code.rawValue)).", checked: false
                ))
        }
        // Clock skew against the server's Date.
        if let probe = probeServerDate {
            if let serverDate = probe(account) {
                let skew = abs(serverDate.timeIntervalSince(now()))
                checks.append(
                    skew > 300
                        ? check(
                            "clock", account, .fail, "This machine's clock is \(Int(skew)) s off the server's.",
                            fix: "Enable time synchronisation (e.g. systemd-timesyncd).")
                        : check("clock", account, .ok, "The clock agrees with the server (\(Int(skew)) s)."))
            } else {
                checks.append(
                    check(
                        "clock", account, .warn, "Could not check the clock: the server did not answer.", checked: false
                    ))
            }
        }
        return checks
    }

    /// What a database that does not open means: locked, a full disk or another I/O problem (could
    /// not check), a newer format, or — only with its key certainly read — damage.
    func databaseOpenFailure(_ account: Account, _ error: OStackError, directory: String) -> Check {
        switch error.code {
        case .locked, .pinLockedOut:
            return check(
                "database", account, .warn, "Could not check the database: the account is locked.",
                fix: "Run \(command: .unlock(account: account.alias)) and then \(command: .doctor).", checked: false)
        case .storageFailure where diskIsFull(directory):
            return check(
                "database", account, .warn, "Could not open the database: the disk is full (nothing is damaged).",
                fix: "Free disk space, then run \(command: .doctor) again.", checked: false)
        case .storageFailure:
            return check(
                "database", account, .warn,
                "Could not open the database (an I/O or permission problem, not a wrong key).",
                fix:
                    "Check the disk and the permissions of the account's directory, then run \(command: .doctor) again.",
                checked: false)
        case .unsupportedFormat:
            return check(
                "database", account, .fail, "The database was written by a newer ostack.",
                fix: "Use the newer version that wrote it (nothing was changed).")
        case .storageUnreadable:
            return check(
                "database", account, .fail, "The database does not open with its key (damaged or replaced).",
                fix:
                    "Restore the account's files from a backup; without one, \(command: .login(account: account.alias)) with --rebuild-local-data rebuilds them from the server (unsynced changes are lost)."
            )
        default:
            return check(
                "database", account, .warn, "Could not check the database (\(error.code.rawValue)).", checked: false)
        }
    }

    func keyringItems(_ account: Account) -> Check {
        do {
            let present = Set(
                try environment.secrets.list(namespace: environment.namespaces.account(account.id)).map(\.kind))
            var expected: Set<SecretKind> = []
            if account.sessionState != .signedOut {
                expected.insert(account.credentialKind == .apiKey ? .apiKey : .sessionToken)
            }
            if environment.hasPIN(account) {
                expected.formUnion([.pinRing, .recoveryRing])
            } else if !environment.keyIsSealed(account) {
                expected.insert(.dbKey)
            }
            var allowed = expected.union([.auditAnchor])
            if environment.keyIsSealed(account) { allowed.insert(.recoveryRing) }
            let missing = expected.subtracting(present)
            let stray = present.subtracting(allowed)
            if !missing.isEmpty {
                return check(
                    "keyring-items", account, .fail,
                    "Missing keyring item(s): \(missing.map(\.rawValue).sorted().joined(separator: ", ")).",
                    fix: missing.contains(.dbKey)
                        ? "The database key is not in the keyring: restore the keyring from a backup; until then the local data cannot be read."
                        : .run(.login(account: account.alias)))
            }
            if !stray.isEmpty {
                return check(
                    "keyring-items", account, .warn,
                    "Unexpected keyring item(s): \(stray.map(\.rawValue).sorted().joined(separator: ", ")).",
                    fix: "Run \(command: .logout(account: account.alias)) and sign in again to tidy them.")
            }
            return check("keyring-items", account, .ok, "Every expected keyring item is present, nothing stray.")
        } catch {
            return check(
                "keyring-items", account, .warn, "Could not list the keyring items (\(error.code.rawValue)).",
                checked: false)
        }
    }
}
