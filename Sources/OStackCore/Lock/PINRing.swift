import SodiumKit

/// The `pin-ring` keyring item (docs/security.md#pin-3): 32 random bytes `K_ring` and the consecutive
/// failure counter. The counter is written back (incremented) BEFORE Argon2 runs, so killing the
/// process mid-derivation still costs an attempt.
public struct PINRing: Sendable {
    public static let maximumFailures = 5

    public var ringKey: RingKey
    public var failures: UInt32

    public init(ringKey: RingKey, failures: UInt32) {
        self.ringKey = ringKey
        self.failures = failures
    }

    /// A fresh ring with a random key and no failures.
    public static func generate() -> PINRing { PINRing(ringKey: RingKey.generate(), failures: 0) }

    /// `K_ring ‖ failures (big-endian u32)`, in secret memory.
    public func encoded() -> SecretBytes {
        SecretBytes(count: 36) { out in
            ringKey.bytes.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 32) }
            for index in 0..<4 { out[32 + index] = UInt8(truncatingIfNeeded: failures >> UInt32(24 - 8 * index)) }
        }
    }

    public init(decoding item: SecretBytes) throws(OStackError) {
        guard item.count == 36 else {
            throw OStackError(.unsupportedFormat, detail: "pin-ring item has the wrong size")
        }
        ringKey = RingKey(
            SecretBytes(count: 32) { out in
                item.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
            })
        failures = item.withUnsafeBytes { bytes in
            (32..<36).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[$1]) }
        }
    }

    public var attemptsLeft: Int { max(0, Self.maximumFailures - Int(failures)) }
}
