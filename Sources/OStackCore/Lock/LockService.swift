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

    /// Sets a PIN: ring item, PIN envelope, recovery envelope, the session token sealed under the DEK,
    /// the DEK handed to the agent, and finally the plain `db-key` deleted (absence verified).
    /// Returns the recovery key (shown once, as `RecoveryKey.format`).
    public func setPIN(_ account: Account, pin: PIN) throws(OStackError) -> RecoveryKey {
        guard !environment.hasPIN(account) else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "This account has a PIN: use \(command: .pinChange)."))
        }
        try PINPolicy.validate(pin)
        let dek: AccountDataKey
        if let plain = try secrets.readUpgrading(key(account, .dbKey)) {
            dek = AccountDataKey(plain)
        } else if let unlocked = agent.key(for: account.id) {
            dek = unlocked  // after a lockout, unlocked with the recovery key
        } else {
            throw OStackError(.locked, context: .init(account: account.alias))
        }
        let ring = PINRing.generate()
        try secrets.write(ring.encoded(), for: key(account, .pinRing))
        let envelope = try KeyEnvelope.seal(
            dek, secret: pin, ringKey: ring.ringKey, accountID: account.id, kdf: pinParameters())
        let recoveryKey = RecoveryKey.generate()
        let recoveryRing = RingKey.generate()
        try secrets.write(recoveryRing.bytes, for: key(account, .recoveryRing))
        let recovery = try KeyEnvelope.seal(
            dek, secret: recoveryKey, ringKey: recoveryRing, accountID: account.id, kdf: .interactive())
        try recovery.write(to: environment.recoveryEnvelopePath(account))
        try sealCredential(account, dek: dek)
        FailPoint.hit("pin-set.before-envelope")
        try envelope.write(to: environment.pinEnvelopePath(account))
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
        try deletePlainKey(account)
        environment.audit(account, "pin.set")
        return recoveryKey
    }

    /// Re-seals under a new PIN with a fresh salt and nonce (the DEK does not change).
    public func changePIN(_ account: Account, old: PIN, new: PIN) throws(OStackError) {
        try PINPolicy.validate(new)
        let (dek, ring) = try openWithPIN(account, pin: old)
        try finishReset()
        let envelope = try KeyEnvelope.seal(
            dek, secret: new, ringKey: ring.ringKey, accountID: account.id, kdf: pinParameters())
        try envelope.write(to: environment.pinEnvelopePath(account))
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
        environment.audit(account, "pin.change")
    }

    /// Removes the PIN: the plain `db-key` and the unsealed token come back first, then the PIN items go.
    public func removePIN(_ account: Account, pin: PIN) throws(OStackError) {
        let (dek, _) = try openWithPIN(account, pin: pin)
        try finishReset()
        try secrets.write(dek.bytes, for: key(account, .dbKey))
        guard let back = try secrets.read(key(account, .dbKey)), back == dek.bytes else {
            throw OStackError(.keyringUnavailable, detail: "db-key did not read back")
        }
        try unsealCredential(account, dek: dek)
        do {
            try SecureFileSystem.removeFile(environment.pinEnvelopePath(account))
            try SecureFileSystem.removeFile(environment.recoveryEnvelopePath(account))
        } catch {
            throw OStackError(.storageFailure, detail: "removing envelopes: \(error)")
        }
        try secrets.delete(key(account, .pinRing))
        try secrets.delete(key(account, .recoveryRing))
        agent.forget(account.id)
        environment.audit(account, "pin.remove")
    }

    // MARK: lock / unlock

    public func unlock(_ account: Account, pin: PIN) throws(OStackError) {
        agent.startIfNeeded(environment: processEnvironment)  // starts while Argon2id runs
        let dek: AccountDataKey
        do {
            (dek, _) = try openWithPIN(account, pin: pin)
        } catch {
            // Recorded while locked: buffered, appended to the chain at the next unlock (AuditBuffer).
            if error.code == .wrongPIN || error.code == .pinLockedOut {
                environment.audit(account, "unlock", outcome: "failed", details: ["reason": error.code.rawValue])
            }
            throw error
        }
        environment.audit(account, "unlock", details: ["with": "pin"])
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
        try deletePlainKey(account)  // finishes an interrupted `pin set`
    }

    public func unlock(_ account: Account, recoveryKey: RecoveryKey) throws(OStackError) {
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
            throw error
        }
        environment.audit(account, "recovery-key.used")
        try agent.store(dek, for: account.id, limits: agentLimits, environment: processEnvironment)
    }

    public func lock(_ account: Account) throws(OStackError) {
        guard environment.hasPIN(account) || agent.isUnlocked(account.id) else {
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Account \(account.alias) has no PIN: set one with \(command: .pinSet)."))
        }
        agent.forget(account.id)
        environment.audit(account, "lock")
    }

    public func lockAll() { agent.forgetAll() }

    /// One PIN attempt (docs/security.md#pin-3): the failure counter is incremented and persisted BEFORE Argon2 runs,
    /// reset on success; the fifth consecutive failure crypto-erases the PIN path (#pin-4).
    func openWithPIN(_ account: Account, pin: PIN) throws(OStackError) -> (AccountDataKey, PINRing) {
        guard let envelope = try KeyEnvelope.read(from: environment.pinEnvelopePath(account)) else {
            if SecureFileSystem.exists(environment.recoveryEnvelopePath(account)) {
                throw OStackError(.pinLockedOut, context: .init(account: account.alias))
            }
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Account \(account.alias) has no PIN: set one with \(command: .pinSet)."))
        }
        guard let item = try secrets.read(key(account, .pinRing)) else {
            throw OStackError(.pinLockedOut, context: .init(account: account.alias))
        }
        var ring = try PINRing(decoding: item)
        if ring.failures >= UInt32(PINRing.maximumFailures) {
            try erasePINPath(account)
            throw OStackError(.pinLockedOut, context: .init(account: account.alias))
        }
        ring.failures += 1
        // The incremented counter is persisted BEFORE Argon2 runs, so killing the process at any
        // point of the derivation still costs the attempt. (The store call returns once the keyring
        // daemon holds the item; a read-back would add nothing against a killed client.)
        try secrets.write(ring.encoded(), for: key(account, .pinRing))
        FailPoint.hit("unlock.after-count")
        let kek = try envelope.deriveKEK(secret: pin, ringKey: ring.ringKey, accountID: account.id)
        do {
            let dek = try envelope.open(kek: kek, accountID: account.id)
            ring.failures = 0
            // The reset runs while the caller hands the key to the agent; `unlock` waits for it.
            pendingReset.set(CounterWrite(secrets: secrets, key: key(account, .pinRing), ring: ring))
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
        try secrets.delete(key(account, .pinRing))
        do {
            try SecureFileSystem.removeFile(environment.pinEnvelopePath(account))
        } catch {
            throw OStackError(.storageFailure, detail: "removing pin.env: \(error)")
        }
    }

    /// `db-key.pending`: a `pin set` wrote its envelope but may not yet have deleted the plain key.
    func plainKeyMarker(_ account: Account) -> String {
        environment.layout.accountDirectory(account.dataDirectory) + "/db-key.pending"
    }

    func markPlainKeyPending(_ account: Account, _ pending: Bool) throws(OStackError) {
        do {
            if pending {
                try SecureFileSystem.writeAtomically([], to: plainKeyMarker(account))
            } else {
                try SecureFileSystem.removeFile(plainKeyMarker(account))
            }
        } catch {
            throw OStackError(.storageFailure, detail: "db-key marker: \(error)")
        }
    }

    func deletePlainKey(_ account: Account) throws(OStackError) {
        guard try secrets.read(key(account, .dbKey)) != nil else { return }
        try secrets.delete(key(account, .dbKey))
        guard try secrets.read(key(account, .dbKey)) == nil else {
            throw OStackError(.keyringUnavailable, detail: "the plain db-key is still in the keyring")
        }
    }

    func credentialKey(_ account: Account) -> SecretKey {
        key(account, account.credentialKind == .apiKey ? .apiKey : .sessionToken)
    }

    func sealCredential(_ account: Account, dek: AccountDataKey) throws(OStackError) {
        guard let item = try secrets.read(credentialKey(account)), !TokenSeal.isSealed(item) else { return }
        let sealed = try TokenSeal.seal(SessionCredential(item), dek: dek, account: account.id)
        try secrets.write(sealed, for: credentialKey(account))
    }

    func unsealCredential(_ account: Account, dek: AccountDataKey) throws(OStackError) {
        guard let item = try secrets.read(credentialKey(account)), TokenSeal.isSealed(item) else { return }
        let token = try TokenSeal.open(item, dek: dek, account: account.id)
        try secrets.write(token.bytes, for: credentialKey(account))
    }
}

/// Writes the incremented `pin-ring` on a background thread and verifies it by reading it back.
final class CounterWrite: @unchecked Sendable {
    // @unchecked Sendable: `outcome` is written by the worker before `group.leave()` and read only
    // after `group.wait()`.
    private let group = DispatchGroup()
    private var outcome: OStackError?

    init(secrets: any SecretStore, key: SecretKey, ring: PINRing) {
        let encoded = ring.encoded()
        let expected = ring.failures
        group.enter()
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            do throws(OStackError) {
                try secrets.write(encoded, for: key)
                guard let back = try secrets.read(key), try PINRing(decoding: back).failures == expected else {
                    throw OStackError(.keyringUnavailable, detail: "the failure counter did not persist")
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
