internal import CSodium

/// Purpose-bound subkeys from a 32-byte master key (`crypto_kdf_derive_from_key`) — docs/security.md#sod-6.
/// HKDF is not in libsodium 1.0.18; this is its replacement for keys derived from the DEK.
public enum SubkeyDerivation {
    /// Derives `length` bytes (16…64) for `(id, context)`; `context` must be exactly 8 ASCII bytes.
    public static func derive(from master: SecretBytes, id: UInt64, context: String, length: Int = 32)
        throws(SodiumError) -> SecretBytes
    {
        Sodium.ensureInitialized()
        guard master.count == crypto_kdf_keybytes() else {
            throw .invalidKeyLength(expected: crypto_kdf_keybytes(), actual: master.count)
        }
        let contextBytes = Array(context.utf8)
        guard contextBytes.count == crypto_kdf_contextbytes(), contextBytes.allSatisfy({ $0 < 0x80 }) else {
            throw .invalidInput
        }
        guard (crypto_kdf_bytes_min()...crypto_kdf_bytes_max()).contains(length) else { throw .invalidInput }
        let output = SecretBytes(zeroedCount: length)
        output.withUnsafeMutableBytes { out in
            master.withUnsafeBytes { key in
                contextBytes.withUnsafeBytes { ctx in
                    _ = crypto_kdf_derive_from_key(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), length, id,
                        ctx.baseAddress!.assumingMemoryBound(to: CChar.self),
                        key.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return output
    }
}
