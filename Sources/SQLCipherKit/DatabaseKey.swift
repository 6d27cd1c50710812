import SodiumKit

/// A 32-byte raw SQLCipher key (the account DEK, docs/security.md#sqlc-1). Raw keys skip SQLCipher's PBKDF2:
/// the key already has full entropy.
public struct DatabaseKey: Sendable {
    public static let length = 32
    public let bytes: SecretBytes

    /// Wraps existing key bytes (e.g. read from the keyring). Throws on a wrong length.
    public init(_ bytes: SecretBytes) throws(SQLiteError) {
        guard bytes.count == Self.length else {
            throw SQLiteError(
                kind: .other, code: 21, extendedCode: 21, operation: "key", message: "key must be 32 bytes")
        }
        self.bytes = bytes
    }

    /// A fresh random key from the CSPRNG.
    public static func generate() -> DatabaseKey {
        try! DatabaseKey(SecretBytes(randomCount: length))
    }

    /// `x'<64 hex>'` in secret memory: the raw-key form `sqlite3_key` expects.
    func rawKeyLiteral() -> SecretBytes {
        let hex = bytes.hexEncoded()
        return SecretBytes(count: hex.count + 3) { out in
            out[0] = UInt8(ascii: "x")
            out[1] = UInt8(ascii: "'")
            hex.withUnsafeBytes {
                out.baseAddress!.advanced(by: 2).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
            out[hex.count + 2] = UInt8(ascii: "'")
        }
    }
}
