internal import CSodium

/// A fixed-size buffer of secret bytes in `sodium_malloc` memory (docs/security.md#sod-7).
///
/// - The memory is guarded (canary + guard pages), `mlock`ed where the limit allows, and wiped by
///   `sodium_free` when the last reference goes away.
/// - `==` is constant time (`sodium_memcmp`, docs/security.md#sod-9).
/// - `description` and `debugDescription` print `<redacted>`, so a secret never reaches a log by
///   string interpolation.
/// - The bytes are reachable only inside `withUnsafeBytes` / `withUnsafeMutableBytes`, so no
///   copy escapes into ordinary (unwiped) Swift memory by accident.
///
/// The type is a reference type on purpose: copying a secret should be explicit (`copy()`).
public final class SecretBytes: @unchecked Sendable {
    // @unchecked Sendable: the buffer is written only during initialisation or through
    // `withUnsafeMutableBytes`, which callers use before sharing the value; reads are safe.
    private let pointer: UnsafeMutableRawPointer
    /// The number of secret bytes.
    public let count: Int

    /// Allocates `count` zeroed secret bytes. Traps if `sodium_malloc` fails (out of memory).
    public init(zeroedCount count: Int) {
        precondition(count >= 0, "SecretBytes count must not be negative")
        Sodium.ensureInitialized()
        // sodium_malloc(0) returns a valid pointer; allocate at least 1 byte for simplicity.
        guard let raw = sodium_malloc(max(count, 1)) else {
            fatalError("sodium_malloc failed: out of memory")
        }
        sodium_memzero(raw, max(count, 1))
        self.pointer = raw
        self.count = count
    }

    /// Allocates `count` bytes from the operating system's CSPRNG (`randombytes_buf`).
    public convenience init(randomCount count: Int) {
        self.init(zeroedCount: count)
        randombytes_buf(pointer, count)
    }

    /// Copies `bytes` into secret memory. The caller remains responsible for wiping its own copy
    /// (see `SecretBytes.wipe(_:)`).
    public convenience init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        self.init(zeroedCount: bytes.count)
        let buffer = UnsafeMutableRawBufferPointer(start: pointer, count: count)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
    }

    /// Builds a secret by letting `body` fill a freshly allocated, zeroed buffer of `count` bytes.
    public convenience init(
        count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws -> Void
    ) rethrows {
        self.init(zeroedCount: count)
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    deinit {
        sodium_free(pointer)  // wipes, then releases the guarded allocation
    }

    /// Read access to the secret bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Write access to the secret bytes. Do not let the pointer escape `body`.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// An independent copy in new secret memory.
    public func copy() -> SecretBytes {
        SecretBytes(count: count) { destination in
            destination.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: count))
        }
    }

    /// Lower-case hexadecimal encoding, itself in secret memory (used for SQLCipher's
    /// `x'<hex>'` raw key form without the hex ever living in an ordinary `String`).
    public func hexEncoded() -> SecretBytes {
        let hexCount = count * 2
        return SecretBytes(count: hexCount) { destination in
            // sodium_bin2hex writes a NUL terminator, so encode into a buffer one byte longer.
            let scratch = SecretBytes(zeroedCount: hexCount + 1)
            scratch.withUnsafeMutableBytes { hex in
                _ = sodium_bin2hex(
                    hex.baseAddress!.assumingMemoryBound(to: CChar.self), hexCount + 1,
                    pointer.assumingMemoryBound(to: UInt8.self), count)
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: hex[0..<hexCount]))
            }
        }
    }

    /// Overwrites the secret with zeros now, for a holder that forgets a key while other references
    /// may still exist (the last reference wipes it anyway when it frees the memory).
    public func wipe() {
        sodium_memzero(pointer, max(count, 1))
    }

    /// Overwrites an ordinary byte array with zeros (best effort for buffers that had to exist
    /// outside secret memory, e.g. bytes read from a pipe).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
        bytes.removeAll()
    }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison of equal-length secrets; different lengths compare unequal.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return sodium_memcmp(lhs.pointer, rhs.pointer, lhs.count) == 0
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible {
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
