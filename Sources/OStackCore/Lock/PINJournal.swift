import FoundationEssentials
import PlatformKit
import SodiumKit

/// The journal of `pin set` and `pin remove` (`pin-journal.json` in the account directory, 0600,
/// non-secret; docs/storage.md, "PIN lock"), so that `kill -9` at any point leaves an account that
/// unlocks with what the user knows — the old state (no PIN, or the PIN) or the new one — and a PIN is
/// never set whose recovery key was not shown.
///
/// - `set`, phase `staged`: the new ring keys are in the keyring under the pending kinds
///   (`pin-ring-pending`, `recovery-ring-pending`) and the envelopes are staged as `pin.env.new` /
///   `recovery.env.new`; nothing the account uses has changed. The recovery key is shown after this
///   point and before the commit. Recovery: undo (the PIN was not set).
/// - `set`, phase `committing`: roll forward — pending rings → real rings, staged envelopes renamed
///   into place, the token sealed (the plain `db-key` is still there until then), `db-key` deleted
///   (verified), pending items deleted, journal cleared.
/// - `remove`, phase `committing` (written after `db-key` is back and read back): roll forward —
///   unseal the token, remove `pin.env` and `recovery.env`, delete the ring items, clear the journal.
///
/// - `change`, phase `staged`: a new ring key (failures 0) is under `pin-ring-pending` and the
///   envelope sealed with it and the new PIN is staged as `pin.env.new`; the old PIN still opens the
///   account. Recovery: undo (the PIN did not change).
/// - `change`, phase `committing`: roll forward as for `set` — the pending ring → `pin-ring`, the
///   staged envelope renamed into place, the pending item deleted, the journal cleared. A new ring key
///   means an older `pin.env` (a backup, a copy) no longer opens with the old PIN.
public struct PINJournal: Codable, Equatable, Sendable {
    public enum Operation: String, Codable, Sendable { case set, change, remove }
    public enum Phase: String, Codable, Sendable { case staged, committing }

    public var version = 1
    public var operation: Operation
    public var phase: Phase

    static func path(_ environment: AuthEnvironment, _ account: Account) -> String {
        environment.layout.accountDirectory(account.dataDirectory) + "/pin-journal.json"
    }

    public static func isPending(_ environment: AuthEnvironment, _ account: Account) -> Bool {
        SecureFileSystem.exists(path(environment, account))
    }

    static func load(_ environment: AuthEnvironment, _ account: Account) throws(OStackError) -> PINJournal? {
        let journal = try JournalFile.read(PINJournal.self, at: path(environment, account), name: "PIN journal")
        guard journal == nil || journal?.version == 1 else {
            throw OStackError(.unsupportedFormat, detail: "the PIN journal is not readable")
        }
        return journal
    }

    func save(_ environment: AuthEnvironment, _ account: Account) throws(OStackError) {
        let path = Self.path(environment, account)
        try JournalFile.write(
            self, to: path, in: environment.layout.accountDirectory(account.dataDirectory), name: "PIN journal")
    }

    static func clear(_ environment: AuthEnvironment, _ account: Account) throws(OStackError) {
        try JournalFile.clear(path(environment, account), name: "PIN journal")
    }

    /// Finishes or undoes every interrupted `pin set` / `pin remove` (one `stat` per account when
    /// there is none), so every command that opens the keyring can call it first. A journal whose
    /// account's PIN lock another process holds is not interrupted but under way: left alone.
    public static func recoverAll(_ environment: AuthEnvironment) throws(OStackError) {
        for account in try environment.registry.accounts() where isPending(environment, account) {
            guard let lock = try PINLock.acquireIfFree(environment, account) else { continue }
            do {
                try withExtendedLifetime(lock) { () throws(OStackError) in
                    try recover(account, environment: environment)
                }
            } catch  where error.code == .unsupportedFormat {
                // A damaged journal stops only its own account's PIN operations (`doctor` names it),
                // not every command of every account.
                continue
            }
        }
    }

    /// Finishes (`committing`) or undoes (`staged`) the interrupted operation of one account. The
    /// caller holds the account's PIN lock (`PINLock`).
    static func recover(_ account: Account, environment: AuthEnvironment) throws(OStackError) {
        guard let journal = try load(environment, account) else { return }
        let steps = PINSteps(environment: environment, account: account)
        switch (journal.operation, journal.phase) {
        case (.set, .staged), (.change, .staged):
            try steps.undoStagedSet()
            environment.audit(
                account, journal.operation.event, outcome: "failed", details: ["reason": "interrupted"])
        case (.set, .committing), (.change, .committing):
            try steps.finishSet(journal.operation, storeInAgent: nil, details: ["resumed": "yes"])
        case (.remove, _):
            try steps.finishRemove()
            environment.agent?.forget(account.id)
            environment.audit(account, "pin.remove", details: ["resumed": "yes"])
        }
    }
}

extension PINJournal.Operation {
    /// The audit event of the operation: `pin.set`, `pin.change`, `pin.remove`.
    var event: String { "pin.\(rawValue)" }
}

/// The idempotent steps of `pin set`, `pin change` and `pin remove`, shared by the commands and by
/// recovery.
struct PINSteps {
    let environment: AuthEnvironment
    let account: Account

    var secrets: any SecretStore { environment.secrets }
    func key(_ kind: SecretKind) -> SecretKey { environment.namespaces.key(account.id, kind) }
    var pinPath: String { environment.pinEnvelopePath(account) }
    var recoveryPath: String { environment.recoveryEnvelopePath(account) }
    static let staged = ".new"

    func writeVerified(_ value: SecretBytes, _ kind: SecretKind) throws(OStackError) {
        try secrets.write(value, for: key(kind))
        guard let back = try secrets.read(key(kind)), back == value else {
            throw OStackError(.keyringUnavailable, detail: "\(kind.rawValue) did not read back")
        }
    }

    func removeFile(_ path: String) throws(OStackError) {
        do { try SecureFileSystem.removeFile(path) } catch {
            throw OStackError(.storageFailure, detail: "removing a PIN file: \(error)")
        }
    }

    /// `pin set` or `pin change`, phase `staged`, undone: the account is as it was (no PIN, after a
    /// lockout its recovery envelope, or the old PIN).
    func undoStagedSet() throws(OStackError) {
        try removeFile(pinPath + Self.staged)
        try removeFile(recoveryPath + Self.staged)
        try secrets.delete(key(.pendingPINRing))
        try secrets.delete(key(.pendingRecoveryRing))
        try PINJournal.clear(environment, account)
    }

    /// `pin set` or `pin change`, phase `committing`, rolled forward (every step idempotent; a change
    /// has no recovery ring or envelope staged and no plain `db-key`). The operation's event is
    /// recorded before the journal is cleared: killed in between, recovery records it again
    /// (`resumed`) rather than never.
    func finishSet(
        _ operation: PINJournal.Operation = .set, storeInAgent: ((AccountDataKey) throws(OStackError) -> Void)?,
        details: [String: String] = [:]
    ) throws(OStackError) {
        func hit(_ set: StaticString, _ change: StaticString) { FailPoint.hit(operation == .change ? change : set) }
        for (pending, real) in [(SecretKind.pendingPINRing, SecretKind.pinRing), (.pendingRecoveryRing, .recoveryRing)]
        {
            if let value = try secrets.read(key(pending)) { try writeVerified(value, real) }
        }
        hit("pin-set.after-ring-copy", "pin-change.after-ring-copy")
        do {
            if SecureFileSystem.exists(recoveryPath + Self.staged) {
                try SecureFileSystem.replace(recoveryPath, with: recoveryPath + Self.staged)
            }
            hit("pin-set.after-recovery-envelope", "pin-change.after-recovery-envelope")
            if SecureFileSystem.exists(pinPath + Self.staged) {
                try SecureFileSystem.replace(pinPath, with: pinPath + Self.staged)
            }
        } catch {
            throw OStackError(.storageFailure, detail: "installing the PIN envelopes: \(error)")
        }
        hit("pin-set.after-pin-envelope", "pin-change.after-pin-envelope")
        // The plain db-key is deleted last, so while it exists the DEK is at hand to seal the token.
        if let plain = try secrets.readUpgrading(key(.dbKey)) {
            let dek = AccountDataKey(plain)
            try sealCredential(dek: dek)
            hit("pin-set.after-seal", "pin-change.after-seal")
            try storeInAgent?(dek)
            hit("pin-set.after-agent", "pin-change.after-agent")
            try secrets.delete(key(.dbKey))  // verified
            hit("pin-set.after-db-key-delete", "pin-change.after-db-key-delete")
        }
        try secrets.delete(key(.pendingPINRing))
        try secrets.delete(key(.pendingRecoveryRing))
        environment.audit(account, operation.event, details: details)
        hit("pin-set.after-audit", "pin-change.after-audit")
        try PINJournal.clear(environment, account)
    }

    /// `pin remove`, phase `committing`, rolled forward: the plain `db-key` is back (verified before
    /// the journal was written), so the DEK is at hand for every step.
    func finishRemove() throws(OStackError) {
        guard let plain = try secrets.read(key(.dbKey)) else {
            throw OStackError(.keyringUnavailable, detail: "pin remove journal without db-key")
        }
        try unsealCredential(dek: AccountDataKey(plain))
        FailPoint.hit("pin-remove.after-unseal")
        try removeFile(pinPath)
        FailPoint.hit("pin-remove.after-pin-envelope")
        try removeFile(recoveryPath)
        FailPoint.hit("pin-remove.after-recovery-envelope")
        try secrets.delete(key(.pinRing))
        try secrets.delete(key(.recoveryRing))
        FailPoint.hit("pin-remove.after-rings")
        try PINJournal.clear(environment, account)
    }

    var credentialKey: SecretKey { key(account.credentialKind == .apiKey ? .apiKey : .sessionToken) }

    func sealCredential(dek: AccountDataKey) throws(OStackError) {
        guard let item = try secrets.read(credentialKey), !TokenSeal.isSealed(item) else { return }
        let sealed = try TokenSeal.seal(SessionCredential(item), dek: dek, account: account.id)
        try writeVerified(sealed, credentialKey.kind)
    }

    func unsealCredential(dek: AccountDataKey) throws(OStackError) {
        guard let item = try secrets.read(credentialKey), TokenSeal.isSealed(item) else { return }
        let token = try TokenSeal.open(item, dek: dek, account: account.id)
        try writeVerified(token.bytes, credentialKey.kind)
    }
}
