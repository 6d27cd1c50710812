import SodiumKit

/// The recovery key shown once at `pin set` (docs/storage.md, "PIN lock"): 160 random bits as 32 base32 characters in
/// groups of four (`ABCD-EFGH-…`). Parsing ignores case, spaces and dashes.
public struct RecoveryKey: EnvelopeSecret {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    public static let byteCount = 20
    public static let envelopePurpose = KeyEnvelope.Purpose.recovery

    /// The 20 key bytes.
    public let bytes: SecretBytes

    public init(_ bytes: SecretBytes) {
        self.bytes = bytes
    }

    /// Parses user input (see `parse(_:)`).
    public init(parsing text: SecretBytes) throws(OStackError) {
        self = try Self.parse(text)
    }

    public static func generate() -> RecoveryKey { RecoveryKey(SecretBytes(randomCount: byteCount)) }

    /// `format(self)`.
    public func formatted() -> SecretBytes { Self.format(self) }

    /// The grouped base32 text (secret memory; the caller prints it once).
    public static func format(_ key: RecoveryKey) -> SecretBytes {
        precondition(key.bytes.count == byteCount)
        return SecretBytes(count: 32 + 7) { out in
            key.bytes.withUnsafeBytes { bytes in
                var buffer: UInt64 = 0
                var bits = 0
                var written = 0
                var position = 0
                for byte in bytes {
                    buffer = buffer << 8 | UInt64(byte)
                    bits += 8
                    while bits >= 5 {
                        bits -= 5
                        if written > 0 && written % 4 == 0 {
                            out[position] = UInt8(ascii: "-")
                            position += 1
                        }
                        out[position] = alphabet[Int((buffer >> UInt64(bits)) & 31)]
                        position += 1
                        written += 1
                    }
                }
            }
        }
    }

    /// Parses user input back into the 20 key bytes.
    public static func parse(_ text: SecretBytes) throws(OStackError) -> RecoveryKey {
        var symbols: [UInt8] = []
        defer { SecretBytes.wipe(&symbols) }
        var valid = true
        text.withUnsafeBytes { bytes in
            for byte in bytes {
                if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") || byte == 0x0A || byte == 0x0D { continue }
                let upper = (97...122).contains(byte) ? byte - 32 : byte
                guard let index = alphabet.firstIndex(of: upper) else {
                    valid = false
                    return
                }
                symbols.append(UInt8(index))
            }
        }
        guard valid, symbols.count == 32 else {
            throw OStackError(.invalidInput, context: .init(suggestion: "A recovery key has 32 letters and digits."))
        }
        let key = SecretBytes(count: byteCount) { out in
            var buffer: UInt64 = 0
            var bits = 0
            var position = 0
            for symbol in symbols {
                buffer = buffer << 5 | UInt64(symbol)
                bits += 5
                if bits >= 8 {
                    bits -= 8
                    out[position] = UInt8(truncatingIfNeeded: buffer >> UInt64(bits))
                    position += 1
                }
            }
        }
        return RecoveryKey(key)
    }
}
