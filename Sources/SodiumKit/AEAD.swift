internal import CSodium

/// XChaCha20-Poly1305 (IETF) authenticated encryption — docs/security.md#sod-5. A random 24-byte nonce per seal;
/// the associated data binds a box to its context (account id, parameters).
public enum AEAD {
    public static var keyLength: Int { crypto_aead_xchacha20poly1305_ietf_keybytes() }
    public static var nonceLength: Int { crypto_aead_xchacha20poly1305_ietf_npubbytes() }
    public static var tagLength: Int { crypto_aead_xchacha20poly1305_ietf_abytes() }

    /// A sealed message: nonce plus ciphertext‖tag.
    public struct SealedBox: Sendable, Equatable, Codable {
        public var nonce: [UInt8]
        public var ciphertext: [UInt8]

        public init(nonce: [UInt8], ciphertext: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
        }

        /// `nonce ‖ ciphertext`, for storage as one blob.
        public var combined: [UInt8] { nonce + ciphertext }

        public init(combined: [UInt8]) throws(SodiumError) {
            guard combined.count >= AEAD.nonceLength + AEAD.tagLength else { throw .invalidInput }
            nonce = Array(combined[0..<AEAD.nonceLength])
            ciphertext = Array(combined[AEAD.nonceLength...])
        }
    }

    /// Encrypts a secret under `key` (32 bytes) with `associatedData`.
    public static func seal(_ plaintext: SecretBytes, key: SecretBytes, associatedData: [UInt8]) throws(SodiumError)
        -> SealedBox
    {
        Sodium.ensureInitialized()
        guard key.count == keyLength else { throw .invalidKeyLength(expected: keyLength, actual: key.count) }
        let nonce = SecureRandom.bytes(nonceLength)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var written: UInt64 = 0
        ciphertext.withUnsafeMutableBytes { out in
            plaintext.withUnsafeBytes { message in
                key.withUnsafeBytes { keyBytes in
                    associatedData.withUnsafeBytes { ad in
                        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                            out.baseAddress!.assumingMemoryBound(to: UInt8.self), &written,
                            message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nil, nonce,
                            keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        return SealedBox(nonce: nonce, ciphertext: Array(ciphertext[0..<Int(written)]))
    }

    /// Decrypts and authenticates; any mismatch is `authenticationFailed`.
    public static func open(_ box: SealedBox, key: SecretBytes, associatedData: [UInt8]) throws(SodiumError)
        -> SecretBytes
    {
        Sodium.ensureInitialized()
        guard key.count == keyLength else { throw .invalidKeyLength(expected: keyLength, actual: key.count) }
        guard box.nonce.count == nonceLength, box.ciphertext.count >= tagLength else { throw .invalidInput }
        let plaintext = SecretBytes(zeroedCount: box.ciphertext.count - tagLength)
        var written: UInt64 = 0
        let rc = plaintext.withUnsafeMutableBytes { out in
            box.ciphertext.withUnsafeBytes { cipher in
                key.withUnsafeBytes { keyBytes in
                    associatedData.withUnsafeBytes { ad in
                        crypto_aead_xchacha20poly1305_ietf_decrypt(
                            out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written, nil,
                            cipher.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(cipher.count),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), box.nonce,
                            keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        guard rc == 0 else { throw .authenticationFailed }
        return plaintext
    }
}
