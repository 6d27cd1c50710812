import Dispatch
import Synchronization
import PlatformKit
import SodiumKit

/// PIN lock (docs/storage.md, "PIN lock"; docs/security.md#pin-3, #pin-4): `pin set|change|remove`, `lock`, `unlock`.
public struct LockService: Sendable {
    public let environment: AuthEnvironment
    public let agent: AgentClient
    /// The environment a started agent inherits.
    public let processEnvironment: [String: String]
    /// How long the agent keeps an unlocked key (config `agent.idle-timeout`, `agent.max-lifetime`).
    public var agentLimits = AgentLimits.defaults
    /// Argon2id for new PIN envelopes: MODERATE (docs/security.md#sod-3); the floor INTERACTIVE is allowed for tests.
    public var pinParameters: @Sendable () -> Argon2id.Parameters = { .moderate() }

    /// A counter reset still being written after a successful PIN (see `finishReset`).
    let pendingReset = ResetSlot()

    public init(environment: AuthEnvironment, agent: AgentClient, processEnvironment: [String: String]) {
        self.environment = environment
        self.agent = agent
        self.processEnvironment = processEnvironment
    }

    var secrets: any SecretStore { environment.secrets }
    func key(_ account: Account, _ kind: SecretKind) -> SecretKey { environment.namespaces.key(account.id, kind) }

    // MARK: pin set / change / remove

    /// A `pin set` staged but not committed: its recovery key must be shown before `commitPIN`.
    public struct PendingPIN: Sendable {
        public let account: Account
        /// Shown once, as `RecoveryKey.formatted()`.
        public let recoveryKey: RecoveryKey
        let dek: AccountDataKey
        /// The account's PIN lock, held from staging until the commit (released with the last copy).
        let lock: FileLock
    }

    /// Sets a PIN in one call (`preparePIN` then `commitPIN`): for callers that show the recovery key
    /// afterwards. The CLI shows it between the two, so a PIN never exists whose key was not shown.
    public func setPIN(_ account: Account, pin: PIN) throws(OStackError) -> RecoveryKey {
        let pending = try preparePIN(account, pin: pin)
        try commitPIN(pending)
        return pending.recoveryKey
    }

    /// Stages a PIN (PINJournal, phase `staged`): new ring keys under the pending kinds, the envelopes as
    /// `pin.env.new` / `recovery.env.new`. Nothing the account uses changes; a crash undoes it.
    public func preparePIN(_ account: Account, pin: PIN) throws(OStackError) -> PendingPIN {
        try agent.verify()  // the agent must be able to hold the key before anything is staged
        let lock = try PINLock.acquire(environment, account)
        if PINJournal.isPending(environment, account) { try PINJournal.recover(account, environment: environment) }
        guard !environment.hasPIN(account) else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "This account has a PIN: use \(command: .pinChange)."))
        }
        let pin = pin.composed  // sealed in NFC (PIN.composed)
        try PINPolicy.validate(pin)
        let dek: AccountDataKey
        if let plain = try secrets.readUpgrading(key(account, .dbKey)) {
            dek = AccountDataKey(plain)
        } else if let unlocked = agent.key(for: account.id) {
            dek = unlocked  // after a lockout, unlocked with the recovery key
        } else {
            throw OStackError(.locked, context: .init(account: account.alias))
        }
        let steps = PINSteps(environment: environment, account: account)
        try PINJournal(operation: .set, phase: .staged).save(environment, account)
        FailPoint.hit("pin-set.after-journal")
        let ring = PINRing.generate()
        try steps.writeVerified(ring.encoded(), .pendingPINRing)
        let recoveryRing = RingKey.generate()
        try steps.writeVerified(recoveryRing.bytes, .pendingRecoveryRing)
        FailPoint.hit("pin-set.after-rings")
        let envelope = try KeyEnvelope.seal(
            dek, secret: pin, ringKey: ring.ringKey, accountID: account.id, kdf: pinParameters())
        let recoveryKey = RecoveryKey.generate()
        let recovery = try KeyEnvelope.seal(
            dek, secret: recoveryKey, ringKey: recoveryRing, accountID: account.id, kdf: .interactive())
        try recovery.write(to: environment.recoveryEnvelopePath(account) + PINSteps.staged)
        try envelope.write(to: environment.pinEnvelopePath(account) + PINSteps.staged)
        FailPoint.hit("pin-set.after-staging")
        return PendingPIN(account: account, recoveryKey: recoveryKey, dek: dek, lock: lock)
    }

    /// Commits a staged PIN (PINJournal, phase `committing`, rolled forward after a crash): ring keys,
    /// envelopes, the sealed token, the DEK to the agent, and the plain `db-key` deleted (verified).
    public func commitPIN(_ pending: PendingPIN) throws(OStackError) {
        defer { withExtendedLifetime(pending.lock) {} }
        let account = pending.account
        // Still the account that was staged (removed, or removed and signed in again meanwhile:
        // nothing is committed into another one; its staged files are undone).
        guard
            let current = try environment.registry.accounts().first(where: { $0.id == account.id }),
            current.dataDirectory == account.dataDirectory
        else {
            try? PINSteps(environment: environment, account: account).undoStagedSet()
            throw OStackError(
                .unknownAccount, context: .init(account: account.alias), detail: "account changed before the PIN commit"
            )
        }
        try PINJournal(operation: .set, phase: .committing).save(environment, account)
        FailPoint.hit("pin-set.after-commit-journal")
        let agent = self.agent
        let limits = agentLimits
        let processEnvironment = self.processEnvironment
        var stored = false
        try PINSteps(environment: environment, account: account).finishSet(storeInAgent: {
            (dek: AccountDataKey) throws(OStackError) in
            try agent.store(dek, for: account.id, limits: limits, environment: processEnvironment)
            stored = true
        })
        if !stored {
            // After a lockout (no plain db-key) the DEK came from the agent already; keep it unlocked.
            try agent.store(pending.dek, for: account.id, limits: limits, environment: processEnvironment)
        }
    }

    /// Re-seals the DEK under a new PIN and a new ring key (fresh salt and nonce; the DEK does not
    /// change), journaled like `pin set` (PINJournal, operation `change`): staged as
    /// `pin-ring-pending` and `pin.env.new`, committed by copying the ring and renaming the envelope.
    /// A crash leaves the old PIN (before the commit) or the new one; an older `pin.env` no longer
    /// opens with the old PIN, because its ring key is gone.
    public func changePIN(_ account: Account, old: PIN, new: PIN) throws(OStackError) {
        try agent.verify()  // the agent must be able to hold the key before the old PIN is spent
        let new = new.composed  // sealed in NFC (PIN.composed)
        try PINPolicy.validate(new)
        let lock = try PINLock.acquire(environment, account)
        defer { withExtendedLifetime(lock) {} }
        if PINJournal.isPending(environment, account) { try PINJournal.recover(account, environment: environment) }
        let (dek, _) = try openAudited(account, pin: old, event: "pin.change")
        try finishReset()  // the old ring's counter reset is written before the new ring replaces it
        FailPoint.hit("pin-change.after-open")
        let steps = PINSteps(environment: environment, account: account)
        try PINJournal(operation: .change, phase: .staged).save(environment, account)
        let ring = PINRing.generate()
        try steps.writeVerified(ring.encoded(), .pendingPINRing)
        FailPoint.hit("pin-change.after-ring")
        let envelope = try KeyEnvelope.seal(
            dek, secret: new, ringKey: ring.ringKey, accountID: account.id, kdf: pinParameters())
        try envelope.write(to: environment.pinEnvelopePath(account) + PINSteps.staged)
        FailPoint.hit("pin-change.after-staging")
        try PINJournal(operation: .change, phase: .committing).save(environment, account)
        FailPoint.hit("pin-change.after-commit-journal")
        // Recorded before the journal is cleared, as soon as the change has taken effect (AUD-5).
        try steps.finishSet(.change, storeInAgent: nil)
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
    }

    /// Removes the PIN: the plain `db-key` comes back first (read back), then the journal (phase
    /// `committing`) and the rolled-forward steps: unsealed token, envelopes and ring items removed.
    public func removePIN(_ account: Account, pin: PIN) throws(OStackError) {
        let lock = try PINLock.acquire(environment, account)
        defer { withExtendedLifetime(lock) {} }
        if PINJournal.isPending(environment, account) { try PINJournal.recover(account, environment: environment) }
        let (dek, _) = try openAudited(account, pin: pin, event: "pin.remove")
        try finishReset()
        FailPoint.hit("pin-remove.after-open")
        let steps = PINSteps(environment: environment, account: account)
        try steps.writeVerified(dek.bytes, .dbKey)
        FailPoint.hit("pin-remove.after-db-key")
        try PINJournal(operation: .remove, phase: .committing).save(environment, account)
        FailPoint.hit("pin-remove.after-journal")
        try steps.finishRemove()
        agent.forget(account.id)
        environment.audit(account, "pin.remove")
    }

    /// `openWithPIN` for `pin change` and `pin remove`: a wrong PIN (or the lockout it causes) is
    /// recorded as the command's failed event, as `unlock` records its own (AUD-5); guesses spent
    /// through these commands left no trace.
    private func openAudited(_ account: Account, pin: PIN, event: String) throws(OStackError) -> (
        AccountDataKey, PINRing
    ) {
        do {
            return try openWithPIN(account, pin: pin)
        } catch {
            if error.code == .wrongPIN || error.code == .pinLockedOut {
                environment.audit(account, event, outcome: "failed", details: ["reason": error.code.rawValue])
            }
            throw error
        }
    }

    // MARK: lock / unlock

    public func unlock(_ account: Account, pin: PIN) throws(OStackError) {
        try agent.verify()  // a runtime directory or socket of another user: refuse before anything (#lock-3)
        // Attempts one at a time: each is counted, checked and reset before the next is counted.
        let lock = try PINLock.acquire(environment, account)
        defer { withExtendedLifetime(lock) {} }
        // A PIN operation killed while this unlock waited for its lock (the command's recovery passed
        // over it then, as under way) is finished or undone first: between a change's ring and its
        // envelope neither PIN opens the account, and each try would be counted.
        if PINJournal.isPending(environment, account) { try PINJournal.recover(account, environment: environment) }
        let dek: AccountDataKey
        // While Argon2id runs, on one other thread: the agent is started if it is not running, the
        // audit buffer's key is read, and whether a plain db-key is left over from an interrupted
        // `pin set` is looked up (no other keyring call is under way then; the key is deleted only
        // after the PIN has opened the envelope).
        let plainKey = PlainKeyProbe()
        do {
            (dek, _) = try openWithPIN(
                account, pin: pin,
                whileDeriving: { [secrets, environment, agent, processEnvironment] in
                    let key = self.key(account, .dbKey)
                    plainKey.start {
                        agent.startIfNeeded(environment: processEnvironment)
                        plainKey.auditKey = environment.auditBufferKey()
                        return (try? secrets.read(key)).map { $0 != nil } ?? true
                    }
                },
                afterDeriving: { plainKey.wait() })
        } catch {
            plainKey.wait()
            // Recorded while locked: buffered, appended to the chain at the next unlock (AuditBuffer).
            if error.code == .wrongPIN || error.code == .pinLockedOut {
                environment.audit(account, "unlock", outcome: "failed", details: ["reason": error.code.rawValue])
            }
            throw error
        }
        // The key goes to the agent while the counter reset completes on its own thread; the audit
        // event (a keyring read and write for its buffer's anchor) comes after the reset, so that
        // no two keyring calls of this process ever overlap (libsecret's calls are not safe to
        // run at once).
        do {
            try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
        } catch {
            try? finishReset()
            throw error
        }
        try finishReset()  // the counter reset is durable (read back) before `unlock` returns (#pin-3)
        environment.audit(account, "unlock", details: ["with": "pin"], key: plainKey.auditKey)
        if plainKey.wait() { try deletePlainKey(account) }  // finishes an interrupted `pin set`
    }

    public func unlock(_ account: Account, recoveryKey: RecoveryKey) throws(OStackError) {
        try agent.verify()  // as `unlock` with the PIN: nothing is tried where the key could not go
        guard let envelope = try KeyEnvelope.read(from: environment.recoveryEnvelopePath(account)),
            let ring = try secrets.read(key(account, .recoveryRing))
        else {
            throw OStackError(.invalidInput, context: .init(suggestion: "This account has no recovery key."))
        }
        let dek: AccountDataKey
        do {
            dek = try envelope.open(secret: recoveryKey, ringKey: RingKey(ring), accountID: account.id)
        } catch {
            environment.audit(account, "unlock", outcome: "failed", details: ["with": "recovery-key"])
            // The envelope says "wrong secret" in the PIN's words; here the secret is the recovery key.
            if error.code == .wrongPIN { throw OStackError(.wrongRecoveryKey, context: .init(account: account.alias)) }
            throw error
        }
        environment.audit(account, "recovery-key.used")
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
    }

    /// Whether the account has a PIN, none, or one locked out by too many wrong tries (files only).
    public enum PINState: Sendable { case none, set, lockedOut }

    /// Refuses a runtime directory or agent socket of another user (#lock-3), before anything else.
    public func verifyAgent() throws(OStackError) { try agent.verify() }

    /// Why a PIN without its `pin.env` cannot unlock: after a lockout (its counter erased, or at
    /// its limit when the lockout was killed half-way) `pin-locked-out`; with the counter still below
    /// the limit the file went missing (`storage-missing`, naming pin.env): "Too many wrong PINs"
    /// blamed the user for a file that was deleted or not restored.
    public func missingPINError(_ account: Account) -> OStackError {
        if let item = try? secrets.read(key(account, .pinRing)), let ring = try? PINRing(decoding: item),
            ring.failures < UInt32(PINRing.maximumFailures)
        {
            return OStackError(
                .storageMissing, context: .init(account: account.alias, object: "pin.env"), detail: "pin.env missing")
        }
        return OStackError(.pinLockedOut, context: .init(account: account.alias))
    }

    public func pinState(_ account: Account) -> PINState {
        if SecureFileSystem.exists(environment.pinEnvelopePath(account)) { return .set }
        return SecureFileSystem.exists(environment.recoveryEnvelopePath(account)) ? .lockedOut : .none
    }

    /// Locks one account; `.agentStopped` when the agent did not answer and was killed, which
    /// locked every account (`AgentClient.forgetOrStop`).
    @discardableResult
    public func lock(_ account: Account) throws(OStackError) -> AgentClient.ForgetOutcome {
        // A locked-out PIN is still a PIN (the key is sealed): locking it is no mistake.
        guard pinState(account) != .none || agent.isUnlocked(account.id) else {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Account \(account.alias) has no PIN: set one with \(command: .pinSet)."))
        }
        // An agent that cannot be reached safely has not forgotten anything: said, not "Locked".
        let outcome = try agent.forgetChecked(account.id)
        environment.audit(account, "lock", details: outcome == .agentStopped ? ["agent": "stopped"] : [:])
        return outcome
    }

    /// `lock --all`: the agent forgets every key; each of `accounts` with a PIN records a lock.
    @discardableResult
    public func lockAll(_ accounts: [Account]) throws(OStackError) -> AgentClient.ForgetOutcome {
        let outcome = try agent.forgetAllChecked()
        for account in accounts where pinState(account) != .none {
            environment.audit(account, "lock", details: outcome == .agentStopped ? ["agent": "stopped"] : [:])
        }
        return outcome
    }

    /// One PIN attempt (docs/security.md#pin-3): the failure counter is incremented and persisted BEFORE Argon2 runs,
    /// reset on success; the fifth consecutive failure crypto-erases the PIN path (#pin-4).
    /// `whileDeriving` runs once the attempt is counted, just before the key derivation starts;
    /// `afterDeriving` as soon as it ends, before any other keyring call (it waits for whatever
    /// `whileDeriving` started).
    func openWithPIN(
        _ account: Account, pin: PIN, whileDeriving: () -> Void = {}, afterDeriving: () -> Void = {}
    ) throws(OStackError) -> (AccountDataKey, PINRing) {
        guard let envelope = try KeyEnvelope.read(from: environment.pinEnvelopePath(account)) else {
            if SecureFileSystem.exists(environment.recoveryEnvelopePath(account)) { throw missingPINError(account) }
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Account \(account.alias) has no PIN: set one with \(command: .pinSet)."))
        }
        // An envelope asking Argon2id for more than ostack ever writes is refused before it costs an
        // attempt (it would hold the unlock for hours or exhaust the memory).
        try envelope.checkCost()
        // Read, refuse at the limit, increment and persist — under the counter lock (PINCounter.swift).
        var ring = try countAttempt(account)
        FailPoint.hit("unlock.after-count")
        whileDeriving()
        // One attempt, one PIN: its composed form, then (only when it differs) the bytes as typed,
        // which an envelope sealed before PINs were composed may hold (PIN.unlockForms).
        var opened: Result<AccountDataKey, OStackError> = .failure(OStackError(.wrongPIN))
        for form in pin.unlockForms {
            let derived = Result { () throws(OStackError) in
                try envelope.deriveKEK(secret: form, ringKey: ring.ringKey, accountID: account.id)
            }
            // A derivation the OS refused memory for checked nothing: the attempt is given back (a
            // host short of memory must not count the right PIN towards the lockout).
            if case .failure(let error) = derived, error.code == .notEnoughMemory {
                afterDeriving()
                try? refundAttempt(account)
                throw OStackError(.notEnoughMemory, context: .init(account: account.alias, count: error.context.count))
            }
            let kek: KeyEncryptionKey
            do { kek = try derived.get() } catch {
                afterDeriving()
                throw error
            }
            opened = Result { () throws(OStackError) in try envelope.open(kek: kek, accountID: account.id) }
            if case .success = opened { break }
        }
        afterDeriving()
        do {
            let dek = try opened.get()
            ring.failures = 0
            // The reset runs while the caller hands the key to the agent; `unlock` waits for it.
            pendingReset.set(
                CounterWrite(
                    secrets: secrets, key: key(account, .pinRing), ring: ring,
                    lock: (pinCounterLockPath(account), environment.lockTimeout)))
            return (dek, ring)
        } catch  where error.code == .wrongPIN {
            if ring.failures >= UInt32(PINRing.maximumFailures) {
                try erasePINPath(account)
                throw OStackError(.pinLockedOut, context: .init(account: account.alias))
            }
            throw OStackError(.wrongPIN, context: .init(account: account.alias, count: ring.attemptsLeft))
        }
    }

    /// Waits for the counter reset of the last successful PIN.
    func finishReset() throws(OStackError) {
        try pendingReset.take()?.wait()
    }

    /// Lockout: the PIN envelope and its ring are deleted; the recovery key (or a new sign-in) remains.
    func erasePINPath(_ account: Account) throws(OStackError) {
        environment.audit(account, "pin.lockout")
        agent.forget(account.id)
        // The envelope first: every reader decides "has a PIN" by it, so a kill between the two
        // steps leaves a locked-out account (recovery key, `pin set`), not one whose ring is gone
        // while its envelope still asks for a PIN nothing can open.
        do {
            try SecureFileSystem.removeFile(environment.pinEnvelopePath(account))
        } catch {
            throw OStackError(.storageFailure, detail: "removing pin.env: \(error)")
        }
        FailPoint.hit("pin-lockout.after-envelope")
        try secrets.delete(key(account, .pinRing))
    }

    func deletePlainKey(_ account: Account) throws(OStackError) {
        guard try secrets.read(key(account, .dbKey)) != nil else { return }
        try secrets.delete(key(account, .dbKey))
        guard try secrets.read(key(account, .dbKey)) == nil else {
            throw OStackError(.keyringUnavailable, detail: "the plain db-key is still in the keyring")
        }
    }
}

/// Looks up, on a background thread, whether a plain `db-key` is in the keyring (true when it is, or
/// when the lookup failed: then `deletePlainKey` checks again).
final class PlainKeyProbe: @unchecked Sendable {
    // @unchecked Sendable: `found` is written by the worker before `group.leave()` and read only
    // after `group.wait()`.
    private let group = DispatchGroup()
    private var found = false
    private var started = false
    /// The audit buffer key, read in the same pass (nil: the audit reads it itself).
    var auditKey: SecretBytes?

    func start(_ lookup: @escaping @Sendable () -> Bool) {
        started = true
        group.enter()
        DispatchQueue.global().async {
            self.found = lookup()
            self.group.leave()
        }
    }

    /// The answer, once the lookup is done (true when it never started: check the slow way).
    @discardableResult
    func wait() -> Bool {
        guard started else { return true }
        group.wait()
        return found
    }
}

/// Writes the reset `pin-ring` on a background thread, under the counter lock, and verifies it by
/// reading it back. A ring deleted meanwhile (a lockout by parallel wrong PINs) is not recreated.
final class CounterWrite: @unchecked Sendable {
    // @unchecked Sendable: `outcome` is written by the worker before `group.leave()` and read only
    // after `group.wait()`.
    private let group = DispatchGroup()
    private var outcome: OStackError?

    init(secrets: any SecretStore, key: SecretKey, ring: PINRing, lock: (path: String, timeout: Double)) {
        let encoded = ring.encoded()
        let expected = ring.failures
        group.enter()
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            do throws(OStackError) {
                try LockService.withCounterLock(path: lock.path, timeout: lock.timeout) { () throws(OStackError) in
                    guard try secrets.read(key) != nil else { return }
                    try secrets.write(encoded, for: key)
                    guard let back = try secrets.read(key), try PINRing(decoding: back).failures == expected else {
                        throw OStackError(.keyringUnavailable, detail: "the failure counter did not persist")
                    }
                }
            } catch {
                outcome = error
            }
            group.leave()
        }
    }

    func wait() throws(OStackError) {
        group.wait()
        if let outcome { throw outcome }
    }
}

/// Holds the in-flight counter reset.
final class ResetSlot: @unchecked Sendable {
    // @unchecked Sendable: access goes through the mutex.
    private let slot = Mutex<CounterWrite?>(nil)

    func set(_ write: CounterWrite) { slot.withLock { $0 = write } }
    func take() -> CounterWrite? {
        slot.withLock { slot in
            defer { slot = nil }; return slot
        }
    }
}
