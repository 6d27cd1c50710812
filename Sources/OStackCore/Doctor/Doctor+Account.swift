import FoundationEssentials
import Glibc
import KeyringKit
import PlatformKit

/// The per-account checks of `doctor` (docs/audit.md, "Doctor").
extension Doctor {
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
            directory + "/audit-pending.jsonl", environment.pinEnvelopePath(account),
            environment.recoveryEnvelopePath(account), PINJournal.path(environment, account),
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
            if (try? PINJournal.load(environment, account)) == nil {
                // Damaged from outside (it is written atomically): which step it recorded is unknown.
                checks.append(
                    check(
                        "pin", account, .fail,
                        "The journal of an interrupted PIN change is damaged; it is left alone.",
                        fix:
                            "If the account has no PIN (status says so), or \(command: .unlock(account: account.alias)) works, delete \(PINJournal.path(environment, account)); otherwise restore the account's directory from a backup."
                    ))
            } else {
                checks.append(
                    check(
                        "pin", account, .warn,
                        "A PIN change was interrupted; the next command that uses the keyring finishes or undoes it.",
                        fix: .run(.authRefresh)))
            }
        } else if let envelopes = pinEnvelopes(account) {
            checks.append(envelopes)
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
            // After a lockout (or without pin.env) the PIN cannot unlock: the recovery key does.
            let unlock: CommandSuggestion =
                error.code == .pinLockedOut || !environment.hasPIN(account)
                ? .unlockWithRecoveryKey(account: account.alias) : .unlock(account: account.alias)
            return check(
                "database", account, .warn, "Could not check the database: the account is locked.",
                fix: "Run \(command: unlock) and then \(command: .doctor).", checked: false)
        case .storageFull, .storageFailure where diskIsFull(directory):
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
        case .storageMissing:
            return check(
                "database", account, .fail,
                "The database is missing or empty (nothing was recreated): this account's local data and queued changes are not there.",
                fix:
                    "Restore the account's data.db from a backup; without one, \(command: .login(account: account.alias)) starts a new local database (changes only in the old one are lost)."
            )
        case .unsupportedFormat:
            return check(
                "database", account, .fail, "The database was written by a newer ostack.",
                fix: "Use the newer version that wrote it (nothing was changed).")
        case .storageUnreadable:
            return check(
                "database", account, .fail, "The database does not open with its key (damaged or replaced).",
                fix:
                    "Restore the account's files from a backup; without one, \(command: .accountsRemove(account: account.alias)) --force and signing in again rebuild them from the server (unsynced changes are lost)."
            )
        default:
            return check(
                "database", account, .warn, "Could not check the database (\(error.code.rawValue)).", checked: false)
        }
    }

    /// The PIN's two envelopes (docs/security.md, PIN-4/PIN-5): a PIN without its recovery envelope
    /// has no way back after a lockout; a missing `pin.env` whose counter is still in the keyring is
    /// not a lockout (unlock calls it one); a lockout itself needs the recovery key, not the PIN.
    func pinEnvelopes(_ account: Account) -> Check? {
        let pin = environment.hasPIN(account)
        let recovery = SecureFileSystem.exists(environment.recoveryEnvelopePath(account))
        if pin && !recovery {
            return check(
                "pin", account, .fail,
                "The recovery envelope (recovery.env) is missing: the recovery key cannot open the data, and a PIN lockout would leave it unreadable.",
                fix:
                    "Restore recovery.env from a backup; or, while the PIN works, remove the PIN and set it again (\(command: .pinSet)) for a new recovery key."
            )
        }
        guard !pin && recovery else { return nil }
        // A lockout removes pin.env and then the counter; one killed between the two leaves the
        // counter at its limit, which is still a lockout.
        let counter = (try? environment.secrets.read(environment.namespaces.key(account.id, .pinRing)))?
            .flatMap { try? PINRing(decoding: $0) }
        if let counter, counter.failures < UInt32(PINRing.maximumFailures) {
            return check(
                "pin", account, .fail,
                "The PIN envelope (pin.env) is missing: the PIN cannot open the data (this is not a lockout).",
                fix:
                    "Restore pin.env from a backup; or unlock with the recovery key (\(command: .unlockWithRecoveryKey(account: account.alias))) and set a new PIN."
            )
        }
        return check(
            "pin", account, .warn, "The PIN is locked out (too many wrong PINs): only the recovery key opens the data.",
            fix: "Run \(command: .unlockWithRecoveryKey(account: account.alias)), then \(command: .pinSet).")
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
            var allowed = expected.union([.auditAnchor, .home])
            // A counter left beside a missing pin.env is the `pin` check's finding, not stray.
            if environment.keyIsSealed(account) { allowed.formUnion([.recoveryRing, .pinRing]) }
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
            if case .other(_, inUse: true) = try HomeClaim(environment: environment).owner(of: account.id) {
                return check(
                    "keyring-items", account, .warn,
                    "Another home on this keyring (another OSTACK_HOME or XDG data directory) also has this account and claimed its keyring items: the two homes share its keys.",
                    fix: "Remove the account in this home (the other home's keys stay), or give this home its own OSTACK_KEYRING_PREFIX and sign in again.")
            }
            return check("keyring-items", account, .ok, "Every expected keyring item is present, nothing stray.")
        } catch {
            return check(
                "keyring-items", account, .warn, "Could not list the keyring items (\(error.code.rawValue)).",
                checked: false)
        }
    }
}
