import FoundationEssentials
import PlatformKit
import SodiumKit
import Synchronization

/// The opt-in `file` backend (docs/keyring.md, "Backends"): every item in one encrypted file, keyed by a passphrase.
///
/// - Key: Argon2id(passphrase) with the parameters and salt stored in the file (MODERATE for a new
///   file); derived once per process and kept in secret memory.
/// - Items: a binary table (namespace, account, kind, version, secret) sealed with
///   XChaCha20-Poly1305 under a fresh nonce on every write; the header is the associated data.
/// - Writes are read-modify-write under an exclusive `flock` and replace the file atomically (0600).
/// - A wrong passphrase is `.wrongPassphrase`; nothing is ever written without a verified key.
public final class FileKeyring: KeyringStore, @unchecked Sendable {
    // @unchecked Sendable: mutable state (the derived key) is behind `cache`'s mutex.
    public let path: String
    /// Asks for the passphrase; `true` when it will create a new file (ask twice).
    let passphrase: @Sendable (_ isNew: Bool) throws(KeyringError) -> SecretBytes
    let newFileParameters: @Sendable () -> Argon2id.Parameters
    let sharedCache: DerivedKeyCache?
    private let cache = Mutex<(key: SecretBytes, parameters: Argon2id.Parameters)?>(nil)

    struct Header: Codable {
        var format = "ostack-file-keyring"
        var version = 1
        var kdf: Argon2id.Parameters
        var nonce: [UInt8]
        var ciphertext: [UInt8]

        var associatedData: [UInt8] {
            Array("\(format)/v\(version)/\(kdf.algorithm)/\(kdf.opsLimit)/\(kdf.memLimit)".utf8) + kdf.salt
        }
    }

    struct Item {
        var address: KeyringAddress
        var secret: SecretBytes
    }

    /// - Parameters:
    ///   - passphrase: asked only when the file must be opened or created (`isNew`: created).
    ///   - parameters: Argon2id parameters for a new file (default MODERATE).
    public init(
        path: String, passphrase: @escaping @Sendable (_ isNew: Bool) throws(KeyringError) -> SecretBytes,
        parameters: @escaping @Sendable () -> Argon2id.Parameters = { .moderate() },
        sharedCache: DerivedKeyCache? = nil
    ) {
        self.path = path
        self.passphrase = passphrase
        self.newFileParameters = parameters
        self.sharedCache = sharedCache
    }

    /// Where a derived key may be kept between processes (ostack's agent), so the passphrase is asked
    /// once per agent session. Entries are `salt ‖ key`; a key is shared only after it opened the file.
    public struct DerivedKeyCache: Sendable {
        public var load: @Sendable () -> SecretBytes?
        public var store: @Sendable (SecretBytes) -> Void

        public init(load: @escaping @Sendable () -> SecretBytes?, store: @escaping @Sendable (SecretBytes) -> Void) {
            self.load = load
            self.store = store
        }
    }

    public func read(_ address: KeyringAddress) throws(KeyringError) -> SecretBytes? {
        try withLockedFile { items in items.first { $0.address == address }?.secret.copy() }
    }

    public func write(_ secret: SecretBytes, for address: KeyringAddress) throws(KeyringError) {
        try modify { items in
            items.removeAll { $0.address == address }
            items.append(Item(address: address, secret: secret.copy()))
        }
    }

    public func delete(_ address: KeyringAddress) throws(KeyringError) {
        try modify { items in items.removeAll { $0.address == address } }
        if try read(address) != nil { throw KeyringError.other("item still present after delete") }
    }

    /// Opens the file (its passphrase), or creates it empty (a new passphrase, asked twice).
    public func prepareForWriting() throws(KeyringError) {
        try withLockedFile(writing: false, create: true) { _ in }
    }

    public func list(namespace: String) throws(KeyringError) -> [KeyringAddress] {
        try withLockedFile { items in items.map(\.address).filter { $0.namespace == namespace } }
    }

    // MARK: File access

    private func modify(_ change: (inout [Item]) -> Void) throws(KeyringError) {
        try withLockedFile(writing: true) { (items: inout [Item]) in change(&items) }
    }

    private func withLockedFile<R>(_ body: ([Item]) throws(KeyringError) -> R) throws(KeyringError) -> R {
        var result: R?
        try withLockedFile(writing: false) { (items: inout [Item]) throws(KeyringError) in result = try body(items) }
        return result!
    }

    private func withLockedFile(
        writing: Bool, create: Bool = false, _ body: (inout [Item]) throws(KeyringError) -> Void
    ) throws(KeyringError) {
        let lock: FileLock
        do {
            try SecureFileSystem.createDirectory(SecureFileSystem.parentDirectory(of: path))
            lock = try FileLock(path: path + ".lock", timeout: 10)
        } catch {
            throw KeyringError.other("file keyring lock: errno \(error.errno)")
        }
        try withExtendedLifetime(lock) { () throws(KeyringError) in
            var (items, parameters) = try load()
            try body(&items)
            // No file and nothing to put in one: nothing to create, and no passphrase to ask for
            // (reading or deleting in a keyring that does not exist yet).
            if writing && (parameters != nil || !items.isEmpty) { try save(items, parameters: parameters) }
            if create && parameters == nil { try save(items, parameters: nil) }
        }
    }

    /// The items and the file's key parameters; no items and nil when there is no file yet.
    private func load() throws(KeyringError) -> ([Item], Argon2id.Parameters?) {
        let bytes: [UInt8]?
        do {
            bytes = try SecureFileSystem.readFile(path)
        } catch {
            throw KeyringError.other("file keyring read: errno \(error.errno)")
        }
        guard let bytes else { return ([], nil) }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(bytes)),
            header.format == "ostack-file-keyring", header.version == 1
        else { throw KeyringError.damaged }
        var candidates = try keys(for: header.kdf)
        while let key = try candidates.next() {
            guard
                let plaintext = try? AEAD.open(
                    AEAD.SealedBox(nonce: header.nonce, ciphertext: header.ciphertext), key: key,
                    associatedData: header.associatedData)
            else { continue }
            cache.withLock { $0 = (key, header.kdf) }
            share(key, parameters: header.kdf)
            return (try Self.decode(plaintext), header.kdf)
        }
        cache.withLock { $0 = nil }
        throw KeyringError.wrongPassphrase
    }

    /// Writes the items; `parameters` nil creates the file (a new passphrase, asked twice).
    private func save(_ items: [Item], parameters: Argon2id.Parameters?) throws(KeyringError) {
        let isNew = parameters == nil
        let parameters = parameters ?? newFileParameters()
        let key = try key(for: parameters, isNew: isNew)
        var header = Header(kdf: parameters, nonce: [], ciphertext: [])
        do {
            let box = try AEAD.seal(Self.encode(items), key: key, associatedData: header.associatedData)
            header.nonce = box.nonce
            header.ciphertext = box.ciphertext
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try SecureFileSystem.writeAtomically(Array(encoder.encode(header)), to: path)
        } catch {
            throw KeyringError.other("file keyring write failed")
        }
        share(key, parameters: parameters)
    }

    /// The key `save` seals with: the one that opened the file, or for a new file the new
    /// passphrase's in NFC (docs/security.md#pin-7).
    private func key(for parameters: Argon2id.Parameters, isNew: Bool = false) throws(KeyringError) -> SecretBytes {
        var candidates = try keys(for: parameters, isNew: isNew)
        guard let key = try candidates.next() else { throw KeyringError.other("file keyring key derivation failed") }
        cache.withLock { $0 = (key, parameters) }
        return key
    }

    /// The keys that may open a file of `parameters`, in order: the one this process (or the
    /// agent) already holds; else the key of the passphrase in NFC, then, only when the typed bytes
    /// differ, the key of the passphrase as typed (a file made before ostack composed passphrases).
    /// Each is derived only when asked for: a right passphrase costs one derivation.
    private func keys(for parameters: Argon2id.Parameters, isNew: Bool = false) throws(KeyringError) -> CandidateKeys {
        if let cached = cache.withLock({ $0 }), cached.parameters == parameters {
            return CandidateKeys(held: cached.key, parameters: parameters)
        }
        if let shared = sharedCache?.load(), shared.count == parameters.salt.count + 32,
            shared.withUnsafeBytes({ Array($0.prefix(parameters.salt.count)) }) == parameters.salt
        {
            return CandidateKeys(
                held: SecretBytes(count: 32) { out in
                    shared.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.suffix(32))) }
                }, parameters: parameters)
        }
        let typed = try passphrase(isNew)
        let forms = typed.composedUTF8.map { isNew ? [$0] : [$0, typed] } ?? [typed]
        return CandidateKeys(passphrases: forms, parameters: parameters)
    }

    /// Keys to try one after the other: one already held, or keys derived from their passphrases as
    /// they are asked for.
    private struct CandidateKeys {
        var held: SecretBytes?
        var passphrases: [SecretBytes] = []
        let parameters: Argon2id.Parameters

        mutating func next() throws(KeyringError) -> SecretBytes? {
            if let key = held {
                held = nil
                return key
            }
            guard !passphrases.isEmpty else { return nil }
            do {
                return try Argon2id.deriveKey(password: passphrases.removeFirst(), parameters: parameters)
            } catch {
                throw KeyringError.other("file keyring key derivation failed")
            }
        }
    }

    /// Shares the key that just opened (or created) the file.
    private func share(_ key: SecretBytes, parameters: Argon2id.Parameters) {
        guard let sharedCache else { return }
        sharedCache.store(
            SecretBytes(count: parameters.salt.count + 32) { out in
                out.copyBytes(from: parameters.salt)
                key.withUnsafeBytes {
                    UnsafeMutableRawBufferPointer(rebasing: out[parameters.salt.count...]).copyMemory(from: $0)
                }
            })
    }

    // MARK: Binary item table (secrets never pass through String)

    static func encode(_ items: [Item]) -> SecretBytes {
        var size = 4
        for item in items {
            size +=
                2 + item.address.namespace.utf8.count + 2 + item.address.account.utf8.count + 2
                + item.address.kind.utf8.count + 4 + 4 + item.secret.count
        }
        return SecretBytes(count: size) { out in
            var offset = 0
            func put32(_ value: UInt32) {
                for shift in stride(from: 24, through: 0, by: -8) {
                    out[offset] = UInt8(truncatingIfNeeded: value >> UInt32(shift)); offset += 1
                }
            }
            func putText(_ text: String) {
                let bytes = Array(text.utf8)
                out[offset] = UInt8(bytes.count >> 8); out[offset + 1] = UInt8(bytes.count & 0xFF); offset += 2
                for byte in bytes { out[offset] = byte; offset += 1 }
            }
            put32(UInt32(items.count))
            for item in items {
                putText(item.address.namespace)
                putText(item.address.account)
                putText(item.address.kind)
                put32(UInt32(item.address.version))
                put32(UInt32(item.secret.count))
                item.secret.withUnsafeBytes { secret in
                    for byte in secret { out[offset] = byte; offset += 1 }
                }
            }
        }
    }

    static func decode(_ plaintext: SecretBytes) throws(KeyringError) -> [Item] {
        var items: [Item] = []
        var failed = false
        plaintext.withUnsafeBytes { bytes in
            var offset = 0
            func need(_ count: Int) -> Bool { offset + count <= bytes.count }
            func get32() -> UInt32? {
                guard need(4) else { return nil }
                var value: UInt32 = 0
                for _ in 0..<4 { value = value << 8 | UInt32(bytes[offset]); offset += 1 }
                return value
            }
            func getText() -> String? {
                guard need(2) else { return nil }
                let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
                offset += 2
                guard need(length) else { return nil }
                defer { offset += length }
                return String(
                    decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]), as: UTF8.self)
            }
            guard let count = get32() else { failed = true; return }
            for _ in 0..<count {
                guard let namespace = getText(), let account = getText(), let kind = getText(), let version = get32(),
                    let length = get32(), need(Int(length))
                else { failed = true; return }
                let secret = SecretBytes(
                    copying: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(length)]))
                offset += Int(length)
                items.append(
                    Item(
                        address: KeyringAddress(
                            namespace: namespace, account: account, kind: kind, version: Int(version)), secret: secret))
            }
        }
        if failed { throw KeyringError.damaged }
        return items
    }
}
