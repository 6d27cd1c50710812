internal import CSodium

/// BLAKE2b (`crypto_generichash`), keyed or not — used for the PIN KEK
/// (`BLAKE2b-256(key=K_ring, "ostack/pin/v1" ‖ accountId ‖ K_pin)`) and the audit chain MAC.
public enum BLAKE2b {
    /// A keyed hash of the concatenation of `parts`, into secret memory (it is a key).
    public static func keyedHash(key: SecretBytes, parts: [[UInt8]], secretParts: [SecretBytes] = [], length: Int = 32)
        throws(SodiumError) -> SecretBytes
    {
        Sodium.ensureInitialized()
        guard (Int(crypto_generichash_keybytes_min())...Int(crypto_generichash_keybytes_max())).contains(key.count)
        else {
            throw .invalidKeyLength(expected: Int(crypto_generichash_keybytes()), actual: key.count)
        }
        guard (Int(crypto_generichash_bytes_min())...Int(crypto_generichash_bytes_max())).contains(length) else {
            throw .invalidInput
        }
        let state = SecretBytes(zeroedCount: crypto_generichash_statebytes())
        let output = SecretBytes(zeroedCount: length)
        state.withUnsafeMutableBytes { raw in
            let statePointer = OpaquePointer(raw.baseAddress!)
            key.withUnsafeBytes { k in
                _ = crypto_generichash_init(
                    statePointer, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count,
                    length)
            }
            for part in parts {
                part.withUnsafeBytes { p in
                    _ = crypto_generichash_update(
                        statePointer, p.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        UInt64(p.count))
                }
            }
            for part in secretParts {
                part.withUnsafeBytes { p in
                    _ = crypto_generichash_update(
                        statePointer, p.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        UInt64(p.count))
                }
            }
            output.withUnsafeMutableBytes { out in
                _ = crypto_generichash_final(
                    statePointer, out.baseAddress!.assumingMemoryBound(to: UInt8.self), length)
            }
        }
        return output
    }

    /// A MAC tag (public bytes) over `message` under `key`.
    public static func mac(key: SecretBytes, message: [UInt8], length: Int = 32) throws(SodiumError) -> [UInt8] {
        try keyedHash(key: key, parts: [message], length: length).withUnsafeBytes { Array($0) }
    }

    /// An unkeyed hash (fingerprints, ETags).
    public static func hash(_ message: [UInt8], length: Int = 32) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: length)
        _ = crypto_generichash(&out, length, message, UInt64(message.count), nil, 0)
        return out
    }

    /// Constant-time equality of two tags (docs/security.md#sod-9).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        Sodium.ensureInitialized()
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }
}
