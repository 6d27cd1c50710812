import FoundationEssentials
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

    public init(environment: AuthEnvironment) {
        self.environment = environment
    }

    public func run(accounts: [Account]) -> [Check] {
        var checks: [Check] = []
        checks += global()
        for account in accounts { checks += self.account(account) }
        return checks
    }

    func check(
        _ name: String, _ account: Account?, _ status: Check.Status, _ message: Wording, fix: Wording? = nil,
        checked: Bool = true
    ) -> Check {
        Check(name: name, account: account?.alias, status: status, message: message, fix: fix, checked: checked)
    }

    // MARK: Global

    func global() -> [Check] {
        var checks: [Check] = []
        // Keyring reachable and unlocked: a harmless listing of a namespace nobody uses.
        do {
            _ = try environment.secrets.list(namespace: "\(environment.namespaces.prefix):doctor-probe")
            checks.append(check("keyring", nil, .ok, "The keyring (\(environment.keyringBackend)) answers."))
        } catch {
            switch error.code {
            case .keyringLocked:
                checks.append(
                    check(
                        "keyring", nil, .fail, "The keyring is locked.",
                        fix:
                            "Unlock your login keyring (log in to the desktop session, or run \(command: .unlock(account: nil)))."
                    ))
            case .keyringTimeout:
                checks.append(
                    check(
                        "keyring", nil, .fail, "The keyring did not answer in time.",
                        fix: "Check that gnome-keyring-daemon is running."))
            default:
                checks.append(
                    check(
                        "keyring", nil, .fail, "No keyring is reachable.",
                        fix: "Start a Secret Service (gnome-keyring), or use `--keyring file`."))
            }
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
        // The global trail.
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
        return checks
    }

    // MARK: Per account

    func account(_ account: Account) -> [Check] {
        var checks: [Check] = []
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
        // Keyring items: expected present, nothing stray.
        checks.append(keyringItems(account))
        // Database, queue, sync and audit need the key.
        let service: AccountSession
        do {
            service = try AccountSession(account: account, environment: environment)
        } catch {
            switch error.code {
            case .locked, .pinLockedOut:
                checks.append(
                    check(
                        "database", account, .warn, "Could not check the database: the account is locked.",
                        fix: "Run \(command: .unlock(account: account.alias)) and then \(command: .doctor).",
                        checked: false))
            case .storageUnreadable, .storageFailure, .unsupportedFormat:
                checks.append(
                    check(
                        "database", account, .fail, "The database does not open with its key (damaged or replaced).",
                        fix:
                            "Restore the account's files from a backup, or \(command: .accountsRemove(account: account.alias)) and sign in again."
                    ))
            default:
                checks.append(
                    check(
                        "database", account, .warn, "Could not check the database (\(error.code.rawValue)).",
                        checked: false))
            }
            return checks
        }
        do {
            if let problem = try service.store.database.integrityProblem() {
                _ = problem
                checks.append(
                    check(
                        "database", account, .fail, "The database fails its integrity check.",
                        fix: "Restore the account's files from a backup, or remove the account and sign in again."))
            } else {
                checks.append(
                    check("database", account, .ok, "The database opens with its key and passes the integrity check."))
            }
        } catch {
            checks.append(
                check(
                    "database", account, .fail, "The database fails its integrity check.",
                    fix: "Restore the account's files from a backup, or remove the account and sign in again."))
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
                        ? "The database key is gone: restore the keyring, or remove the account and sign in again."
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
