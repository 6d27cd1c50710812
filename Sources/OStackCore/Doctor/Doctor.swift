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
        let layout = environment.layout
        // The home as every command checks it first (FileLayout.checkHome): ownership, links, modes.
        do {
            try layout.checkHome()
            checks.append(check("home", nil, .ok, "ostack's directories are yours and closed to other users' writes."))
        } catch {
            checks.append(
                check(
                    "home", nil, .fail,
                    "ostack's directories under \(layout.dataDirectory), \(layout.configDirectory) or \(layout.stateDirectory) are refused (another user's, a link, or writable by others): commands stop there.",
                    fix:
                        "Check OSTACK_HOME (another user's home is never used), or give the directories back to this user with mode 0700."
                ))
        }
        checks.append(settingsCheck())
        // Directories: secrets and locks closed to group and others; the data and configuration
        // directories at least not writable by them (a hand-made 0755 one holds nothing secret).
        for (directory, refused) in [
            (layout.dataDirectory, mode_t(0o022)), (layout.configDirectory, 0o022), (layout.accountsDirectory, 0o077),
            (layout.stateDirectory, 0o077), (layout.locksDirectory, 0o077),
        ] {
            if let mode = SecureFileSystem.mode(of: directory), mode & refused != 0 { wrong.append(directory) }
        }
        // Every file directly in the data, configuration and state directories (the registry, the
        // configuration, the file keyring, the global trail, journals, the debug log).
        let files = [layout.dataDirectory, layout.configDirectory, layout.stateDirectory].flatMap { directory in
            ((try? SecureFileSystem.contentsOfDirectory(directory)) ?? []).map { directory + "/" + $0 }
                .filter { !SecureFileSystem.isDirectory($0, followLinks: false) }
        }
        for file in files {
            if let mode = SecureFileSystem.mode(of: file), mode & 0o077 != 0 { wrong.append(file) }
        }
        checks.append(
            wrong.isEmpty
                ? check("file-modes", nil, .ok, "ostack's directories are 0700 and its files 0600.")
                : check(
                    "file-modes", nil, .fail, "\(wrong.count) path(s) are readable by others.",
                    fix:
                        "chmod 700 the directories and 600 the files: \(wrong.prefix(5).joined(separator: ", "))\(wrong.count > 5 ? ", …" : "")."
                )
        )
        // The agent (only matters with PIN-protected accounts).
        // Connected to, not only looked for: a socket path left by an agent that died, or a
        // directory or another user's agent there, is not "running". Nothing is sent, so the
        // agent's idle timer is not reset.
        if let agent = environment.agent, agent.socketPathProblem == .tooLong {
            checks.append(
                check(
                    "agent", nil, .fail,
                    "The agent's socket path is longer than a Unix socket allows: \(command: .unlock(account: nil)) and \(command: .pinSet) cannot work.",
                    fix: "Use a shorter OSTACK_HOME (without OSTACK_HOME, a shorter XDG_RUNTIME_DIR)."))
        } else if let agent = environment.agent {
            do {
                if try agent.connect() != nil {
                    checks.append(check("agent", nil, .ok, "The agent is running."))
                } else if agent.socketPathProblem == .notASocket {
                    checks.append(
                        check(
                            "agent", nil, .warn,
                            "Something that is not a socket is at the agent's socket path: the agent cannot start (\(command: .unlock(account: nil)) fails).",
                            fix: "Remove \(agent.socketPath), then run \(command: .doctor) again."))
                } else if agent.mightBeRunning {
                    checks.append(
                        check(
                            "agent", nil, .ok,
                            "The agent is not running; the socket it left is replaced when it starts (on \(command: .unlock(account: nil)))."
                        ))
                } else {
                    checks.append(
                        check(
                            "agent", nil, .ok, "The agent is not running (it starts on \(command: .unlock(account: nil)))."))
                }
            } catch {
                checks.append(
                    check(
                        "agent", nil, .fail,
                        "The agent's runtime directory or socket is unsafe (a link, another user's, or open to others): PINs are not entered and keys not handed over there.",
                        fix:
                            "Remove \(agent.runtimeDirectory), or set XDG_RUNTIME_DIR to a private directory, then run \(command: .doctor) again."
                    ))
            }
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
}

extension Doctor {
    /// config.json's settings: one whose value ostack cannot use fails (commands other than `config`
    /// and `doctor` stop on it); keys ostack does not know are a warning (ignored).
    func settingsCheck() -> Check {
        let configuration: Configuration
        do {
            configuration = try environment.configuration.load()
        } catch {
            return check(
                "settings", nil, .fail, "The configuration (config.json) cannot be read.",
                fix: "Restore it from a backup, or move it aside: the next command then starts with default settings.")
        }
        let invalid = configuration.invalidSettings
        if let first = invalid.first {
            let names = invalid.map(\.key).joined(separator: ", ")
            return check(
                "settings", nil, .fail,
                "Not valid in config.json: \(names). Commands that use the keyring or the server stop until \(invalid.count == 1 ? "it is" : "they are") fixed (locking, signing out and removing an account still work).",
                fix: first.invalidError.context.suggestion)
        }
        let unknown = configuration.unknownSettings
        if !unknown.isEmpty {
            return check(
                "settings", nil, .warn,
                "config.json holds settings this version does not know (ignored): \(unknown.prefix(5).joined(separator: ", "))\(unknown.count > 5 ? ", …" : "").",
                fix: "Remove them from config.json (a typo of a known setting's name?).")
        }
        let count = configuration.settings.count
        return check(
            "settings", nil, .ok,
            count == 0
                ? "No setting is changed: each has its default."
                : "\(count) setting(s) set in config.json, all valid.")
    }
}

